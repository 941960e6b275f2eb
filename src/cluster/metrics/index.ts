/** Metrics: definitions and figures (docs/operations.md lists the names); src/web serves them. */
export { BACKEND_LABELS, DEAD_LETTER_REASONS, MetricsDefaults, NODE_ACTOR_KINDS, nodeActorKind, type NodeActorKind } from './defaults.js'
export { BoundedLabel, registerFamily, registerHistogramFamily, type HistogramSample, type Labels, type Sample } from './families.js'
export { ControlMetrics, createControlMetrics, type ControlMetricsSources, type NodesFigures, type StateCounts } from './control-metrics.js'
export { NodeMeter, type ExecMeter, type NodeFigures } from './node-figures.js'
export { parseNodeFigures } from './node-figures-check.js'
