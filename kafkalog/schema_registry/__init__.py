"""A schema registry server, compatible with Confluent's REST API: ``kafkalog registry``.

Its state lives in a compacted topic (``_schemas``) on any Kafka cluster, kafkalog's or Kafka's, in
Confluent's record formats, so several registry processes share it, one of them the primary
(elected through the cluster's group protocol) that writes, the others forwarding writes to it.
One module per job:
- ``errors`` the package's errors, the REST API's codes and texts among them; ``config`` the settings;
- ``records`` the topic's keys and values; ``state`` what they add up to; ``store`` the interface
  to them (and one in memory), ``topic_store`` the topic-backed one;
- ``registry`` the operations and their rules; ``api`` the REST paths, without sockets;
- ``server`` the HTTP server (TLS, basic auth, bounds); ``auth`` the users file; ``forward`` a
  write sent on to the primary; ``election`` who is primary;
- ``app`` the whole registry process put together.
"""
