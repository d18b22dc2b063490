"""What leaves a network: one module per reading, each declaring its geometry and the network form it needs, and
the one runner that loads the network, reads a shard and writes it with its identity.
"""

from evaluate import EvaluationError


class ReadingError(EvaluationError):
    """A reading that cannot be taken or read back as asked; the message names the file or the input."""
