/** Images: the public face of src/images. */
export { BuildDefaults, buildLayerFromDir, debootstrapTree, digestFile, makeErofsImage, run, type Layer } from './build.js'
export { applyLayer, imageLayers, unpackImage } from './oci.js'
export { LayerStore, type LayerSource } from './store.js'
export { buildBusyboxLayer, buildErofsLayer } from './busybox.js'
export { checkImageName, isImageName, LAYER_KINDS, NameIndex, NameIndexDefaults, type LayerKind, type TagRecord } from './names.js'
export { createLazyLayers, type LazyLayers, type LazyLayersOptions } from './lazy.js'
export { startLayerService, type LayerService, type LayerServiceOptions } from './layer-server/index.js'
