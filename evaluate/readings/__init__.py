"""What leaves a network: the readings' geometry (`geometry`), images and their two transforms (`images`), a
shard's inputs decoded once (`inputs`), the feature shards keys480 and tokens224 (`features`), the shard jobs'
entries (`extraction`), and the video reading frames480 (`frames`).
"""
