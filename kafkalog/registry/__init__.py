"""Coordination through ZooKeeper: the broker registry, discovery, and consumer groups.

Small recipe modules over kazoo (the client is passed in; an optional chroot is the client's).
``assign`` is pure: the partition assignors of seed 002, with no ZooKeeper in them.
"""
