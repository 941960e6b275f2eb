/** Images: the public face of src/images. */
export { BuildDefaults, buildLayerFromDir, debootstrapTree, digestFile, makeErofsImage, run, type Layer } from './build.js'
