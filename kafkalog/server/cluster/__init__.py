"""What a broker keeps of its cluster: the brokers and who leads which partition (a static list, or
ZooKeeper), the topics and their configs, the committed group offsets and the producer id blocks.

Invariants: nothing here knows of sockets, the request handlers or security; what is stored is
stored durably (a file replaced atomically, or a ZooKeeper node) before it is answered. The
handlers ask the cluster through ``view.ClusterView`` and the offsets through
``offsets.GroupOffsetStore``, whichever store is behind them; producer id blocks come from the one
``producer_ids.ProducerIds``, given where its blocks are kept (a file, or ZooKeeper).
Import the module that defines a name.
"""
