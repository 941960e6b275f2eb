/**
 * Parsers for /proc/self/mountinfo and /proc/cgroups (proc(5)). Pure functions of the text, so
 * the layouts of other kinds of host can be tested from fixtures.
 */

/** One line of /proc/self/mountinfo. */
export interface MountEntry {
  /** The device the mount's superblock has (`major:minor`, an anonymous device for FUSE). */
  major: number
  minor: number
  /** The path inside the mounted file system that appears at `mountPoint`. */
  root: string
  mountPoint: string
  fsType: string
  source: string
  /** Per-superblock options: for cgroup v1 they name the controllers of the hierarchy. */
  superOptions: string[]
}

// mountinfo escapes space, tab, newline and backslash as octal (\040 …).
const unescape = (s: string): string => s.replace(/\\([0-7]{3})/g, (_m, oct: string) => String.fromCharCode(parseInt(oct, 8)))

/** Parses /proc/self/mountinfo; malformed lines are skipped. */
export function parseMountinfo (text: string): MountEntry[] {
  const out: MountEntry[] = []
  for (const line of text.split('\n')) {
    const fields = line.split(' ')
    // Fields 7.. are optional tags ended by a lone "-"; then fstype, source, super options.
    const dash = fields.indexOf('-', 6)
    if (fields.length < 10 || dash < 0 || dash + 3 >= fields.length) continue
    const [major, minor] = fields[2]!.split(':').map(Number)
    out.push({
      major: major ?? 0,
      minor: minor ?? 0,
      root: unescape(fields[3]!),
      mountPoint: unescape(fields[4]!),
      fsType: fields[dash + 1]!,
      source: unescape(fields[dash + 2]!),
      superOptions: fields[dash + 3]!.split(',')
    })
  }
  return out
}

/** One controller line of /proc/cgroups. */
export interface ProcCgroup {
  /** v1 hierarchy id; 0 when the controller is bound to v2 or not mounted at all. */
  hierarchy: number
  enabled: boolean
}

/** Parses /proc/cgroups (`#subsys_name hierarchy num_cgroups enabled`). */
export function parseProcCgroups (text: string): Map<string, ProcCgroup> {
  const out = new Map<string, ProcCgroup>()
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue
    const [name, hierarchy, , enabled] = line.trim().split(/\s+/)
    if (name === undefined || hierarchy === undefined) continue
    out.set(name, { hierarchy: Number(hierarchy), enabled: enabled !== '0' })
  }
  return out
}
