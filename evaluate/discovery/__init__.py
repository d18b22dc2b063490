"""Object discovery as the field publishes it (docs/design.md §15): keys-native per shard (`protocol.extract`),
every box decoder's boxes per shard (`protocol.decode_boxes`, label-free), and CorLoc on boxes per checkpoint, data
set and decoder (`protocol.score_discovery`, the one place where a label is read and every number decided).
`published` reads the published rows (evaluate/datasets/benchmarks.yaml)."""
