/**
 * Layer uploads: builds push to the control plane's blob store over HTTP, chunked, resumable and
 * checked by digest on arrival. The public face of src/images/upload.
 */
export { UploadDefaults, uploadTunables, type UploadTunables } from './defaults.js'
export { createUploadHandler, isUploadPath, type UploadAuth, type UploadHandler, type UploadHandlerOptions } from './handler.js'
export { Uploads, type UploadsOptions, type UploadStatus } from './uploads.js'
export { httpBase, HttpPushDefaults, pushLayerOverHttp, type HttpPushed, type HttpPushOptions } from './client.js'
