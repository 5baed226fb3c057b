"""Search over harness versions: the gate's rule, screening on rungs, the tree (UCT, back-up), the mixture."""
