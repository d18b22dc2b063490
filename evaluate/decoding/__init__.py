"""The decoder stage (docs/design.md §5, §6): the label-free decoder's setting chosen once on the select split
(`selection`: every setting's Jaccard, the best by mean, the select job's entry) and its masks scored on an eval
data set (`scoring`: Jaccard, CorLoc, mask AP, the score_decoder job's entry), every opening of labels on the
record (`evaluate.ledger.scoring`). Running a shard through a decoder is `decoders.shards`; the measures are
`evaluate.scores`.
"""
