/**
 * Tunable defaults of the microvm backend, in one place. What the agent protocol fixes is in
 * `AgentLimits` (container/protocol.ts): the guest runs the same agent.
 */
export const MicrovmDefaults = {
  /** QEMU (Debian qemu-system-x86); WARREN_QEMU_PATH overrides it. */
  qemuPath: process.env.WARREN_QEMU_PATH ?? '/usr/bin/qemu-system-x86_64',
  /**
   * The host users VMs' QEMUs become once set up, one per live VM (qemu-jail.ts): from
   * 0x70000000 up, a range no distribution hands out (systemd leaves it unused) and above the
   * ranges container managers map.
   */
  qemuUsers: { first: 0x7000_0000, count: 1 << 20 },
  /** Where each user given to a live VM has its lease (qemu-jail.ts), shared by the host's node agents. */
  qemuUserLeases: '/run/warren/qemu-users',
  /** util-linux's unshare: a jailed QEMU starts in a network and IPC namespace of its own (qemu-jail.ts). */
  unsharePath: '/usr/bin/unshare',
  /** Where each VM gets `<id>/` with its sockets (agent, QMP, console) and pid file. */
  runDir: '/run/warren/vms',
  /**
   * Where the guest kernel, initramfs and module disk are kept; default `<dataDir>/guest`.
   * WARREN_GUEST_DIR lets nodes on one machine (tests) share one copy.
   */
  guestDir: process.env.WARREN_GUEST_DIR,
  /** An initramfs of another build that no node has prepared for this long is removed from the guest dir. */
  initramfsKeepMs: 7 * 24 * 3_600_000,
  /** The Debian package whose kernel the guest runs (its dependency names the real one). */
  kernelPackage: 'linux-image-cloud-amd64',
  /** Modules the guest needs to boot (with their dependencies); built-in ones are skipped. */
  bootModules: ['virtio_mmio', 'virtio_blk', 'virtio_console', 'virtio_balloon', 'erofs', 'overlay'] as readonly string[],
  /**
   * The smallest CPU share a VM is given: QEMU starts and the guest boots under it (at 0.1 a boot
   * under TCG took 42 s, at 0.01 QEMU did not start within `startTimeoutMs`).
   */
  minCpus: 0.25,
  /** A guest below this cannot boot the kernel and the agent with room to run anything. */
  minMemoryMiB: 128,
  /** Guest memory, writable layer and process limit when a spec names no limits. */
  memoryMiB: 512,
  diskMiB: 1024,
  pids: 4096,
  /** Most vCPUs one VM gets, whatever it asks for. */
  maxVcpus: 16,
  /** TCG's translated-code cache (QEMU's default is 1 GiB): bounded, so the host cgroup can be. */
  tcgCacheMiB: 64,
  /** QEMU's own memory beyond the guest's (devices, I/O buffers, its heap), charged to its cgroup. */
  qemuOverheadMiB: 160,
  /** Threads QEMU may have (vCPUs, I/O workers, RCU, main): its cgroup's pids limit. */
  qemuPids: 128,
  /** From starting QEMU to its monitor answering (set up and jailed). */
  startTimeoutMs: 15_000,
  /** From starting QEMU to the agent answering inside (TCG boots in seconds, slower when loaded); under the node's 60 s for a start. */
  bootTimeoutMs: 55_000,
  /** How often the node looks for VMs whose agent has stopped answering (agent-watchdog.ts). */
  agentCheckEveryMs: 10_000,
  /** A request or command start unanswered this long makes the node ping the agent. */
  agentStallMs: 30_000,
  /** How long that ping is given; no answer and the VM is ended. */
  agentPingMs: 60_000,
  /** How long an adopted VM's agent is given to answer its first ping; VMs are adopted this many at once. */
  adoptPingMs: 10_000,
  adoptConcurrency: 8,
  /** How long a QMP quit is given before SIGKILL. */
  quitTimeoutMs: 3_000,
  /** How long destroy waits for QEMU to end and its cgroup to empty. */
  destroyTimeoutMs: 10_000,
  /** QMP commands other than quit. */
  qmpTimeoutMs: 5_000,
  /** The console's last bytes kept during boot, to say why a boot failed. */
  consoleTailBytes: 8192,
  /** Saving a VM's machine state to a file, or loading it (the RAM is not in it: ~70 KB). */
  stateTimeoutMs: 20_000,
  /** Saving or loading a memory snapshot (the RAM in the stream): this long, plus `memoryStateMsPerMiB` per MiB of guest memory. */
  memoryStateMsPerMiB: 200,
  /** Migration bandwidth for memory snapshots (QEMU's default, 32 MiB/s, would make a 512 MiB guest's save take 16 s). */
  migrationBytesPerSecond: 8 * 1024 * 1024 * 1024,
  /** How long a VM restored from a memory snapshot is given to see its old host connection end (its agent then opens its port again). */
  hangupTimeoutMs: 10_000,
  /** Saved VMs (templates) kept per backend, each holding its guest's whole RAM, the least recently used dropped past it. */
  maxTemplates: 4,
  /**
   * Guest RAM the templates of a backend hold together, and again its shareable memory snapshots:
   * the least recently used dropped past it, and a shape larger than it is never saved (its VMs
   * boot). The node leaves this much twice outside what it promises VMs (node-process.ts).
   */
  templateMemoryMiB: 2048,
  /**
   * Memory snapshots made shareable kept per backend (each holds its guest's whole RAM): the least
   * recently used dropped past it (its forks keep their mapping).
   */
  maxMemoryTemplates: 2,
  /** Templates that failed to be made or restored from this many times running are given up (VMs boot). */
  templateFailures: 3,
  /**
   * Ready VMs kept per shape in the warm pool, at most (the target grows from 0 with each create
   * that found none); 0 turns the pool off.
   */
  poolMax: 2,
  /** Ready VMs kept in the warm pool over all shapes (each holds its guest's memory). */
  poolMaxTotal: 8,
  /** How long the guest's commands are given to freeze (pause, snapshot). */
  freezeTimeoutMs: 5_000,
  /** Output credit of a snapshot's tar stream: what may be in flight between guest and host. */
  treeWindowBytes: 1024 * 1024,
  /** Bytes of randomness a restored or pooled VM's kernel is given when it is handed out. */
  seedBytes: 64
}
