"""The networks and their files: the ViT-S/16 family (`vit`), XCiT-S12/16 (`xcit`), the architecture registry
(`registry`) and reading checkpoint files into a backbone (`checkpoints`).
"""
