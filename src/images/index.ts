/** Images: the public face of src/images. */
export { BuildDefaults, buildLayerFromDir, debootstrapTree, digestFile, makeErofsImage, run, type Layer } from './build.js'
export { applyLayer, imageLayers, unpackImage } from './oci.js'
export { LayerStore } from './store.js'
export { buildBusyboxLayer, buildErofsLayer } from './busybox.js'
