/** The microvm backend's options and its face beyond `Backend` (backend.ts). */
import type { LayerService, LayerSource } from '../../images/index.js'
import type { CgroupProvider } from '../container/cgroup-types.js'
import type { EgressProxyOptions } from '../container/egress.js'
import type { Backend, SandboxHandle, SandboxSpec } from '../types.js'
import type { GuestImage } from './guest/index.js'
import type { LaunchedVm } from './launcher.js'

export interface MicrovmBackendOptions {
  /** Holds the journal, and the layer store and guest files unless placed elsewhere. */
  dataDir: string
  /** Where layers are cached (default `<dataDir>/layers`). */
  layersDir?: string
  /** Where layers named by digest are fetched from when not cached here. */
  layerSource?: LayerSource
  /** Layers on demand: the layer server's FUSE files become the VMs' read-only disks. */
  lazy?: LayerService
  /** Parent of each VM's socket directory (default `MicrovmDefaults.runDir`); give each node its own. */
  runDir?: string
  /** Groups for QEMU processes; its parent must be this backend's alone (adopt reclaims the rest). */
  cgroups?: CgroupProvider
  /** Where the guest kernel, initramfs and module disk are kept (default `MicrovmDefaults.guestDir`, else `<dataDir>/guest`). */
  guestDir?: string
  /** The operator's guest kernel instead of Debian's, and its module tree. */
  kernel?: string
  kernelModules?: string
  /** Default layer stack when a spec names none. */
  defaultLayers?: string[]
  /** Default: KVM when /dev/kvm opens and QEMU can set up a vCPU with it (accel.ts), else TCG. */
  accel?: 'kvm' | 'tcg'
  /** Kernel parameters added to every VM (`warren.debug=1` writes the guest's set-up steps to its console). */
  extraCmdline?: string
  /** A line per slow step of making the guest (first use only), and when templates fail. */
  onProgress?: (line: string) => void
  /** The warm pool: at most `max` ready VMs per shape (default `MicrovmDefaults.poolMax`; 0: none). */
  pool?: { min?: number, max?: number, maxTotal?: number }
  /** Start VMs from saved templates (default true); off, every VM not from the pool boots. */
  templates?: boolean
  /** Where templates' states are kept (default `<runDir>-templates`; their RAM is the node's, guest-ram.ts). */
  templateDir?: string
  /** How egress proxies resolve names, and the operator's pinned names. */
  egress?: EgressProxyOptions
}

export interface MicrovmBackend extends Backend {
  /** VMs alive, ready ones in the pool, templates kept. */
  status (): { live: number, pooled: number, templates: number, memoryTemplates: number, accel: 'kvm' | 'tcg' }
  /**
   * The machine this node's VMs run on as a memory snapshot records it (`tcg:max:qemu-7.2`): the
   * one its snapshots are saved on and the only one it restores (placement matches the two).
   */
  machine (): Promise<string>
  /** The guest's files, made on first call (creates wait for it too). */
  guest (): Promise<GuestImage>
  /** The QEMU process and host directory of a live VM, for inspection; undefined once it is gone. */
  vm (handle: SandboxHandle): LaunchedVm | undefined
  /** Keeps `n` ready VMs of this spec's shape. */
  prewarm (spec: SandboxSpec, n: number): Promise<void>
  /** The layer server died: VMs reading layers it served have lost them, and end. */
  layersLost (): void
}
