/**
 * The file operations of the agent client (read, write, list, stat, remove, mkdir, rename,
 * symlink): each one request, answered by ok or err.
 */
import { createError, ErrorCodes } from '../../errors.js'
import { nameFromWire, nameToWire, type WireName } from '../../file-names.js'
import type { SandboxFiles, SandboxHandle } from '../types.js'
import type { AgentFiles, FileEntry, FileStat } from './agent-types.js'
import { AgentLimits, isCount, type AgentMessage, type AgentRequest } from './protocol.js'

/** Sends one request and resolves with its ok (rejects with its err). */
export type AgentRequestFn = (msg: AgentRequest) => Promise<Extract<AgentMessage, { t: 'ok' }>>

/** The path as the agent takes it (see file-names.ts); an empty one is refused here. */
function wire (path: string): WireName {
  if (typeof path !== 'string' || path.length === 0) throw createError(ErrorCodes.INVALID_ARGUMENT, 'path must be a non-empty string')
  return nameToWire(path)
}

const FILE_TYPES: ReadonlySet<unknown> = new Set(['file', 'dir', 'symlink', 'other'])

/** A name the agent listed: a str or bin of 1 to NAME_MAX bytes, no `/` or NUL. */
function isListedName (v: unknown): v is WireName {
  const bytes = typeof v === 'string' ? Buffer.from(v) : v instanceof Uint8Array ? v : undefined
  return bytes !== undefined && bytes.length > 0 && bytes.length <= AgentLimits.maxNameBytes && !bytes.includes(0x2f) && !bytes.includes(0)
}

function isEntry (v: unknown): v is FileEntry & { name: WireName } {
  if (v === null || typeof v !== 'object') return false
  const e = v as Record<string, unknown>
  return isListedName(e.name) && FILE_TYPES.has(e.type) && isCount(e.size) && isCount(e.mode) && isCount(e.mtimeMs)
}

function isStat (m: Record<string, unknown>): boolean {
  const target = m.target
  return FILE_TYPES.has(m.type) && [m.size, m.mode, m.uid, m.gid, m.mtimeMs].every(isCount) &&
    (target === undefined || ((typeof target === 'string' || target instanceof Uint8Array) && target.length <= AgentLimits.maxPath))
}

/**
 * The file operations over `request`; `nextId` gives each request its id. An answer that is not
 * what the agent gives (a VM's agent is the tenant's) is `broke`n: the connection ends, and the
 * call fails with BACKEND_UNAVAILABLE.
 */
export function createAgentFiles (request: AgentRequestFn, nextId: () => number, broke: (why: string) => unknown): AgentFiles {
  const outOfProtocol = (op: string): Error => {
    broke(`the agent's answer to ${op} is not one it gives`)
    return createError(ErrorCodes.BACKEND_UNAVAILABLE, `the sandbox's agent answered ${op} out of protocol; its connection was ended`, { reason: 'agent' })
  }
  return {
    async read (path, opts = {}) {
      const m = await request({ t: 'read', id: nextId(), path: wire(path), offset: opts.offset, length: opts.length })
      if (!(m.data instanceof Uint8Array) || m.data.length > (opts.length ?? AgentLimits.maxFileBytes)) throw outOfProtocol('read')
      return m.data
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
      if (!Array.isArray(m.entries) || m.entries.length > AgentLimits.maxListEntries || !m.entries.every(isEntry)) throw outOfProtocol('list')
      const entries = m.entries.map((e) => ({ name: nameFromWire(e.name), type: e.type, size: e.size, mode: e.mode, mtimeMs: e.mtimeMs }))
      return { entries, truncated: m.truncated === true }
    },
    async stat (path, opts = {}) {
      const m = await request({ t: 'stat', id: nextId(), path: wire(path), follow: opts.follow })
      if (!isStat(m)) throw outOfProtocol('stat')
      const stat = { type: m.type, size: m.size, mode: m.mode, uid: m.uid, gid: m.gid, mtimeMs: m.mtimeMs } as FileStat
      return m.target === undefined ? stat : { ...stat, target: nameFromWire(m.target as WireName) }
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
