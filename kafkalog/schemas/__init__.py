"""Schema formats as pure data (Avro, Protobuf, JSON Schema) and the Confluent wire format.

Shared by the schema registry server and the loader: nothing here opens a socket or reads a log.
"""
