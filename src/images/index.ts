/** Images: the public face of src/images. */
export { BuildDefaults, buildLayerFromDir, debootstrapTree, digestFile, makeErofsImage, run, type Layer } from './build.js'
export { ArchiveDefaults, parsePlatform, unpackImage, unpackTar, type UnpackOptions } from './oci/index.js'
export { LayerStore, type LayerSource } from './store.js'
export { buildBusyboxLayer, buildErofsLayer } from './busybox.js'
export { checkImageName, checkTag, isImageName, LAYER_KINDS, NameIndex, NameIndexDefaults, type LayerKind, type TagRecord } from './names.js'
export { describeKind, kindForField, LayerKinds } from './layer-kinds.js'
export { createLazyLayers, type LazyLayers, type LazyLayersOptions } from './lazy.js'
export { startLayerService, type LayerService, type LayerServiceOptions } from './layer-server/index.js'
