/** Placement: the public face of src/cluster/placement. */
export { chooseNode } from './choose.js'
export { createNodeView, fits, release, reserve, score, shiftCpu, type NodeCapacity, type NodeView, type PlacementRequest } from './node-view.js'
export { createPlacementShard, PlacementDefaults, PlacementShard, type NodeUsage, type PlacementShardOptions, type RecoveredNode, type ShardMessage, type ShardStats } from './shard.js'
export { placeBatch, type BatchItem } from './place-batch.js'
