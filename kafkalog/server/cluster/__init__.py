"""What a broker keeps of its cluster: the brokers and who leads which partition (a static list, or
ZooKeeper), the topics and their configs, the committed group offsets and the producer id blocks.

Invariants: nothing here knows of sockets, the request handlers or security; what is stored is
stored durably (a file replaced atomically, or a ZooKeeper node) before it is answered. The
handlers ask through ``view.ClusterView`` and ``offsets.GroupOffsetStore``, never a concrete store.
Import the module that defines a name.
"""
