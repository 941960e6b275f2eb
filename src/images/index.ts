/** Images: the public face of src/images. */
export { BuildDefaults, buildLayerFromDir, debootstrapTree, digestFile, run, type Layer } from './build.js'
