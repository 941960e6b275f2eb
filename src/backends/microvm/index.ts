/** Microvm sandboxes: QEMU microvm guests running warren's agent, their guest image and launcher. */
export { createMicrovmBackend, MicrovmBackendDefaults, type MicrovmBackend, type MicrovmBackendOptions } from './backend.js'
export { MicrovmDefaults } from './defaults.js'
export { guestOomKills, runInVm, type VmExecTarget } from './exec.js'
export { prepareGuest, type GuestImage, type PrepareGuestOptions } from './guest/index.js'
export { destroyVm, launchVm, type LaunchedVm, type LaunchVmOptions } from './launcher.js'
export { connectQmp, type QmpClient } from './qmp.js'
export { detectAccel, hostTscKhz, kernelCmdline, qemuArgs, type VmPlan } from './qemu-args.js'
export { microvmUnavailable } from './available.js'
