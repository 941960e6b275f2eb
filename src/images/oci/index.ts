/** Image archives read in-process: the public face of src/images/oci. */
export { ArchiveDefaults, type ArchiveLimits } from './defaults.js'
export { parsePlatform, platformText, type Platform } from './select.js'
export { unpackImage, unpackTar, type UnpackOptions } from './unpack.js'
