"""Who may do what on the broker: TLS and the principal a certificate names, SASL logins (PLAIN and
SCRAM) against the users file, the bounds on what a connection costs before it logs in, and the ACLs
(Kafka's rules, kept in a file or in ZooKeeper) the handlers ask through ``access``.

Invariants: nothing here knows of sockets, the request handlers or the cluster's state; the network
layer drives sessions and TLS, the handlers ask ``access``. Import the module that defines a name.
"""
