/** Cgroups v1/v2 for container sandboxes: the public face. */
export { CONTROLLERS, detectLayout, type CgroupLayout, type Controller, type ControllerPlace } from './layout.js'
export { CgroupDefaults, createCgroupProvider } from './provider.js'
