/**
 * The file operations of the agent client (read, write, list, stat, remove, mkdir, rename,
 * symlink): each one request, answered by ok or err.
 */
import { createError, ErrorCodes } from '../../errors.js'
import { nameFromWire, nameToWire, type WireName } from '../../file-names.js'
import type { SandboxFiles, SandboxHandle } from '../types.js'
import type { AgentFiles, FileEntry, FileStat } from './agent-types.js'
import { AgentLimits, type AgentMessage, type AgentRequest } from './protocol.js'

/** Sends one request and resolves with its ok (rejects with its err). */
export type AgentRequestFn = (msg: AgentRequest) => Promise<Extract<AgentMessage, { t: 'ok' }>>

/** The path as the agent takes it (see file-names.ts); an empty one is refused here. */
function wire (path: string): WireName {
  if (typeof path !== 'string' || path.length === 0) throw createError(ErrorCodes.INVALID_ARGUMENT, 'path must be a non-empty string')
  return nameToWire(path)
}

/** The file operations over `request`; `nextId` gives each request its id. */
export function createAgentFiles (request: AgentRequestFn, nextId: () => number): AgentFiles {
  return {
    async read (path, opts = {}) {
      const m = await request({ t: 'read', id: nextId(), path: wire(path), offset: opts.offset, length: opts.length })
      return m.data as Uint8Array
    },
    async write (path, data, opts = {}) {
      const p = wire(path)
      if (data.length > AgentLimits.maxFileBytes) {
        throw createError(ErrorCodes.INVALID_ARGUMENT, `${data.length} bytes exceed the write limit of ${AgentLimits.maxFileBytes}`)
      }
      await request({ t: 'write', id: nextId(), path: p, data, mode: opts.mode, append: opts.append, offset: opts.offset, mkdirs: opts.mkdirs })
    },
    async list (path) {
      const m = await request({ t: 'list', id: nextId(), path: wire(path) })
      const entries = (m.entries as Array<FileEntry & { name: WireName }>).map((e) => ({ ...e, name: nameFromWire(e.name) }))
      return { entries, truncated: m.truncated === true }
    },
    async stat (path, opts = {}) {
      const m = await request({ t: 'stat', id: nextId(), path: wire(path), follow: opts.follow })
      const { t: _t, id: _id, target, ...stat } = m
      return (target === undefined ? stat : { ...stat, target: nameFromWire(target as WireName) }) as unknown as FileStat
    },
    async remove (path, opts = {}) {
      await request({ t: 'remove', id: nextId(), path: wire(path), recursive: opts.recursive })
    },
    async mkdir (path, opts = {}) {
      await request({ t: 'mkdir', id: nextId(), path: wire(path), mode: opts.mode, parents: opts.parents })
    },
    async rename (from, to) {
      await request({ t: 'rename', id: nextId(), path: wire(from), to: wire(to) })
    },
    async symlink (path, target, opts = {}) {
      await request({ t: 'symlink', id: nextId(), path: wire(path), target: wire(target), mkdirs: opts.mkdirs })
    }
  }
}

/**
 * The Backend's file operations (`SandboxFiles`) over the agent of each sandbox: every path
 * resolves inside the sandbox because the agent resolves it there.
 */
export function agentSandboxFiles (agentOf: (handle: SandboxHandle) => { files: AgentFiles }): SandboxFiles {
  return {
    maxChunkBytes: AgentLimits.maxFileBytes,
    read: async (handle, path, range) => await agentOf(handle).files.read(path, range),
    write: async (handle, path, data, opts = {}) => { await agentOf(handle).files.write(path, data, { mkdirs: true, ...opts }) },
    list: async (handle, path) => await agentOf(handle).files.list(path),
    stat: async (handle, path, opts) => await agentOf(handle).files.stat(path, opts),
    mkdir: async (handle, path, opts) => { await agentOf(handle).files.mkdir(path, opts) },
    remove: async (handle, path, opts) => { await agentOf(handle).files.remove(path, opts) },
    rename: async (handle, from, to) => { await agentOf(handle).files.rename(from, to) },
    symlink: async (handle, path, target) => { await agentOf(handle).files.symlink(path, target) }
  }
}
