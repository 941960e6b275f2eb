/**
 * A node's local layer store: EROFS images in one directory, named by digest, and a resolver
 * from what a spec names to an image file.
 *
 *   busybox                 the default base layer (static busybox), built on first use
 *   sha256:<hex>            a layer already in the store
 *   dir:/abs/path           a layer built from a host directory on the fly (`--image-dir`)
 *   debian:SUITE[:p1,p2]    a debootstrap tree (minbase + packages), cached, as a layer
 *
 * Builds of the same name run once, however many sandboxes ask at the same moment.
 */
import { existsSync, mkdirSync } from 'node:fs'
import { isAbsolute, join } from 'node:path'
import { createError, ErrorCodes } from '../errors.js'
import { buildLayerFromDir, debootstrapTree } from './build.js'
import { buildBusyboxLayer } from './busybox.js'

export class LayerStore {
  private readonly building = new Map<string, Promise<string>>()

  constructor (readonly dir: string, private readonly onProgress?: (line: string) => void) {
    mkdirSync(dir, { recursive: true })
  }

  /** The image file for a layer reference; builds it when the reference says how. */
  resolve (ref: string): Promise<string> {
    const known = this.building.get(ref)
    if (known !== undefined) return known
    const work = this.build(ref)
    this.building.set(ref, work)
    // A failed build is not remembered: the next create tries again. `dir:` layers are rebuilt
    // each time the process starts, since the directory may have changed.
    work.catch(() => this.building.delete(ref))
    return work
  }

  private async build (ref: string): Promise<string> {
    if (ref === 'busybox') return await buildBusyboxLayer(this.dir)
    if (ref.startsWith('sha256:')) {
      const hex = ref.slice(7)
      if (!/^[0-9a-f]{64}$/.test(hex)) throw createError(ErrorCodes.BAD_SPEC, `bad layer digest ${ref}`, { field: 'image' })
      const path = join(this.dir, `${hex}.erofs`)
      if (!existsSync(path)) throw createError(ErrorCodes.NOT_FOUND, `layer ${ref} is not on this node`)
      return path
    }
    if (ref.startsWith('dir:')) {
      const src = ref.slice(4)
      if (!isAbsolute(src) || !existsSync(src)) throw createError(ErrorCodes.BAD_SPEC, `layer directory ${src} does not exist on the node`, { field: 'image' })
      return (await buildLayerFromDir(src, this.dir)).path
    }
    if (ref.startsWith('debian:')) {
      const [suite, packages = ''] = ref.slice(7).split(':')
      if (suite === undefined || !/^[a-z]+$/.test(suite)) throw createError(ErrorCodes.BAD_SPEC, `bad Debian suite in ${ref}`, { field: 'image' })
      const include = packages.split(',').filter((p) => /^[a-z0-9][a-z0-9+.-]*$/.test(p))
      const tree = await debootstrapTree(join(this.dir, 'trees'), suite, include, this.onProgress)
      return (await buildLayerFromDir(tree, this.dir)).path
    }
    throw createError(ErrorCodes.BAD_SPEC, `unknown layer ${ref}: use busybox, sha256:…, dir:/path or debian:SUITE[:pkgs]`, { field: 'image' })
  }
}
