"""The schema formats of a schema registry as pure data: no network, no log.

Shared by the registry server and the loader. One module per job:
- ``model`` what every format shares (:class:`~kafkalog.schemas.model.SchemaType`,
  :class:`~kafkalog.schemas.model.SchemaReference`, the ``ParsedSchema`` protocol), ``errors``;
- ``avro``, ``protobuf``, ``json_schema``: a schema's text to a parsed, validated schema
  (``parse(text, references)``), each with its canonical text;
- ``avro_compat``, ``protobuf_compat``, ``json_schema_compat``: can one schema read another's data,
  each finding worded as Confluent's registry words it; ``compatibility`` applies them by level;
- ``wire``: the Confluent wire format of a framed value (magic byte, schema id, message indexes).
"""
