"""Avro schemas: JSON text to a typed model of our own, validated as the Avro specification says.

:func:`parse` reads a schema's JSON text, resolving the named types it uses from its references
(each a schema text defining them), and returns an :class:`AvroSchema`: the root type as a graph of
:data:`AvroType` nodes. A named type (record, enum, fixed) is one object wherever it is used, so a
recursive record is a cycle in the graph; the parser builds every node once and nothing changes them
after. Names follow the specification's resolution: a name with a dot is full; otherwise the
``namespace`` attribute, else the enclosing namespace, qualifies it; a reference is looked up in the
enclosing namespace first, then as written.

Validation refuses, with :class:`InvalidSchemaError` naming the first cause and where it is: an
unknown type name, a redefined name, an invalid name or namespace, a duplicate field or enum symbol,
a default that is not a value of its type (judged as Avro's Java library judges it, so that what
Confluent's registry accepts is accepted), a union nested in a union or holding one type twice, a
bad fixed size, and a decimal whose precision or scale break the rules (precision > 0, 0 <= scale
<= precision, and a fixed decimal's precision within its size), a type graph nested deeper than
:data:`MAX_SCHEMA_DEPTH` counting the named types it uses by name, and JSON that cannot be stored
as JSON again (NaN, infinities, lone surrogates). Defaults are judged in time linear in their
size. Other logical types on a type they
do not apply to are ignored, as the specification says (the attribute stays in the text).

Three texts of a schema:
- :meth:`AvroSchema.canonical` is the schema as Avro's Java library writes it
  (``Schema.toString()``, which is what Confluent's registry stores and returns, so two key orders
  of one schema are one text and get one id): keys in Java's order (``type``, ``name``,
  ``namespace``, ``doc``, then ``fields`` (each ``name``, ``type``, ``doc``, ``default``, ``order``,
  ``aliases``, its other attributes), ``symbols`` and ``default``, ``items``, ``values`` or
  ``size``, the other attributes (``logicalType`` among them) in the order given, ``aliases``), a
  named type defined at its first use and named after (short within its namespace), ``namespace``
  written where it changes, attributes Java reserves dropped where a type does not use them (a
  ``doc`` on an array), doubles in Java's notation (``1.0E7``). The references' named types are
  written by name, every one of them (Confluent's registry names only each reference's top-level
  type so, and writes a nested one in full again). Doubles are the shortest digits that read back,
  as Java 19 and later print them; Java 17 prints a few with more digits (2^60 as
  ``1.15292150460684698E18``);
- :meth:`AvroSchema.normalized` is a schema in normal form (full names, a fixed key order,
  references written by full name), what Confluent's ``normalize=true`` stands for;
- :meth:`AvroSchema.parsing_canonical_form` is the specification's Parsing Canonical Form, and
  :meth:`AvroSchema.fingerprint64` its CRC-64-AVRO (Rabin) fingerprint: schema identity as Avro sees
  it (doc, defaults, aliases and logical types dropped).
"""

from __future__ import annotations

import decimal
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from kafkalog.schemas.errors import InvalidSchemaError
from kafkalog.schemas.model import SchemaReference, SchemaType, check_input, check_unicode, load_json

PRIMITIVES: Final = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INT_RANGE: Final = (-(2**31), 2**31 - 1)
_LONG_RANGE: Final = (-(2**63), 2**63 - 1)
MAX_SCHEMA_DEPTH: Final = 200  # nesting of JSON the parser walks; deeper is refused, not a RecursionError

#: logical type -> the types it annotates (decimal is checked on its own: bytes or fixed, with attributes)
_LOGICAL_ON: Final[Mapping[str, frozenset[str]]] = {
    "uuid": frozenset({"string", "fixed"}),
    "date": frozenset({"int"}),
    "time-millis": frozenset({"int"}),
    "time-micros": frozenset({"long"}),
    "timestamp-millis": frozenset({"long"}),
    "timestamp-micros": frozenset({"long"}),
    "timestamp-nanos": frozenset({"long"}),
    "local-timestamp-millis": frozenset({"long"}),
    "local-timestamp-micros": frozenset({"long"}),
    "local-timestamp-nanos": frozenset({"long"}),
    "duration": frozenset({"fixed"}),
    "big-decimal": frozenset({"bytes"}),
}


class _NoDefault:
    """The absence of a default (None is the default ``null``)."""

    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Final = _NoDefault()


@dataclass(frozen=True)
class LogicalType:
    """A logical type that applies to its node (``precision``/``scale`` for decimals only)."""

    name: str
    precision: int | None = None
    scale: int | None = None


@dataclass(frozen=True, eq=False)
class Primitive:
    """``null``, ``boolean``, ``int``, ``long``, ``float``, ``double``, ``bytes`` or ``string``;
    ``props`` are its other attributes as given (``logicalType`` among them)."""

    type: str
    logical: LogicalType | None = None
    props: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Array:
    items: AvroType
    props: Mapping[str, Any] = field(default_factory=dict)
    type: str = "array"


@dataclass(frozen=True, eq=False)
class Map:
    values: AvroType
    props: Mapping[str, Any] = field(default_factory=dict)
    type: str = "map"


@dataclass(frozen=True, eq=False)
class Union:
    branches: tuple[AvroType, ...]
    type: str = "union"


class _Named:
    """A named type's short name and namespace, from its full name."""

    fullname: str

    @property
    def name(self) -> str:
        return self.fullname.rpartition(".")[2]

    @property
    def namespace(self) -> str:
        return self.fullname.rpartition(".")[0]


@dataclass(frozen=True, eq=False)
class Fixed(_Named):
    fullname: str
    size: int
    aliases: tuple[str, ...] = ()
    logical: LogicalType | None = None
    props: Mapping[str, Any] = field(default_factory=dict)
    type: str = "fixed"


@dataclass(frozen=True, eq=False)
class Enum(_Named):
    fullname: str
    symbols: tuple[str, ...]
    default: str | None = None
    aliases: tuple[str, ...] = ()
    doc: str | None = None
    props: Mapping[str, Any] = field(default_factory=dict)
    type: str = "enum"


@dataclass(frozen=True, eq=False)
class Field:
    """A record's field; ``default`` is :data:`NO_DEFAULT` when it has none."""

    name: str
    type: AvroType
    default: Any = NO_DEFAULT
    aliases: tuple[str, ...] = ()
    order: str = "ascending"
    doc: str | None = None
    props: Mapping[str, Any] = field(default_factory=dict)

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT


@dataclass(eq=False)
class Record(_Named):
    """A record (or ``error``). Built by the parser in two steps, the name first and the fields
    second, so its fields may refer to it; never changed after :func:`parse` returns."""

    fullname: str
    fields: tuple[Field, ...] = ()
    aliases: tuple[str, ...] = ()
    doc: str | None = None
    is_error: bool = False
    props: Mapping[str, Any] = field(default_factory=dict)
    type: str = "record"

    def field_named(self, name: str) -> Field | None:
        return next((f for f in self.fields if f.name == name), None)


AvroType: TypeAlias = Primitive | Array | Map | Union | Fixed | Enum | Record
NamedType: TypeAlias = Fixed | Enum | Record


@dataclass(frozen=True, eq=False)
class AvroSchema:
    """A parsed Avro schema: ``root`` and the named types it and its references define
    (``named``, full name -> type; ``referenced`` the names the references define).
    Implements :class:`kafkalog.schemas.model.ParsedSchema`."""

    root: AvroType
    named: Mapping[str, NamedType]
    text: str = field(repr=False)
    references: Sequence[SchemaReference] = ()
    schema_type: SchemaType = SchemaType.AVRO
    referenced: frozenset[str] = frozenset()

    @property
    def name(self) -> str | None:
        return self.root.fullname if isinstance(self.root, Record | Enum | Fixed) else None

    def canonical(self) -> str:
        return self.text

    def normalized(self) -> AvroSchema:
        # the references' types are written by name, as the schema uses them: the text parses
        # again with the same references (inlined, they would be defined twice)
        text = _compact(_to_json(self.root, set(self.referenced)))
        return AvroSchema(self.root, self.named, text, self.references, referenced=self.referenced)

    def parsing_canonical_form(self) -> str:
        return _compact(_pcf(self.root, set()))

    def fingerprint64(self) -> int:
        return fingerprint64(self.parsing_canonical_form().encode())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AvroSchema) and (self.text, tuple(self.references)) == (
            other.text,
            tuple(other.references),
        )

    def __hash__(self) -> int:
        return hash((self.text, tuple(self.references)))


def parse(
    text: str,
    references: Mapping[str, str] | None = None,
    *,
    declared: Sequence[SchemaReference] = (),
) -> AvroSchema:
    """The schema ``text`` (JSON), its named types taken from ``references`` (name -> schema text,
    each parsed first, those another uses before it, whatever their order) where it uses them;
    ``declared`` are the references as the registry keeps them. Raises :class:`InvalidSchemaError`
    naming the first cause."""
    check_input(text, references)
    parser = _Parser()
    pending = dict(references or {})
    while pending:
        # a reference may use the named types of another: those parse first, in as many rounds as
        # it takes; a round that parses none leaves the first one's error standing
        failed: dict[str, tuple[str, InvalidSchemaError]] = {}
        for ref_name, ref_text in pending.items():
            before = dict(parser.named)
            try:
                parser.parse_text(ref_text)
            except InvalidSchemaError as e:
                parser.named = before  # what the failed attempt defined is not defined
                failed[ref_name] = (ref_text, e)
        if len(failed) == len(pending):
            ref_name, (_, error) = next(iter(failed.items()))
            raise InvalidSchemaError(f"reference {ref_name!r}: {error}")
        pending = {name: ref_text for name, (ref_text, _) in failed.items()}
    referenced = frozenset(parser.named)
    root = parser.parse_text(text)
    _check_depth(root)
    canonical = _java_text(_java_json(root, set(referenced), ""))
    return AvroSchema(root, dict(parser.named), canonical, tuple(declared), referenced=referenced)


def _load(text: str) -> Any:
    value = load_json(text)
    check_unicode(_compact(value), "schema")  # a JSON escape may give a lone surrogate
    return value


def _check_depth(root: AvroType) -> None:
    """Refuse a type graph deeper than :data:`MAX_SCHEMA_DEPTH`, counting the named types it uses by
    name (a chain of definitions, each using the one before, nests as deep as it is long, and the
    walks over the graph recurse that deep). A use of a named type inside its own definition (a
    recursive record) counts nothing. Walked with a stack of its own, each node's depth once."""
    depth_of: dict[int, int] = {}
    deepest_below: dict[int, int] = {id(root): 0}
    stack: list[tuple[AvroType, Iterator[AvroType]]] = [(root, iter(_children(root)))]
    on_path = {id(root)}
    while stack:
        node, children = stack[-1]
        child = next(children, None)
        if child is not None:
            if id(child) in on_path:
                continue
            known = depth_of.get(id(child))
            if known is None:
                known = 1
                on_path.add(id(child))
                deepest_below[id(child)] = 0
                stack.append((child, iter(_children(child))))
            else:
                deepest_below[id(node)] = max(deepest_below[id(node)], known)
            if len(stack) + known - 1 > MAX_SCHEMA_DEPTH:
                where = child.fullname if isinstance(child, Record | Enum | Fixed) else child.type
                raise InvalidSchemaError(
                    f"schema nested deeper than {MAX_SCHEMA_DEPTH}, counting the named types it uses (at {where})"
                )
            continue
        stack.pop()
        on_path.discard(id(node))
        depth_of[id(node)] = 1 + deepest_below.pop(id(node))
        if stack:
            parent = id(stack[-1][0])
            deepest_below[parent] = max(deepest_below[parent], depth_of[id(node)])


def _children(node: AvroType) -> list[AvroType]:
    if isinstance(node, Record):
        return [f.type for f in node.fields]
    if isinstance(node, Array):
        return [node.items]
    if isinstance(node, Map):
        return [node.values]
    if isinstance(node, Union):
        return list(node.branches)
    return []


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


#: a JSON string, or a number with a fraction or an exponent (Python writes every float so)
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?')
_CONTROL_ESCAPE = re.compile(r"(\\+)u00([0-9a-f]{2})")


def _java_text(value: Any) -> str:
    """``value`` as compact JSON written as Jackson writes it for Java's Avro library: a double in
    Java's notation (``1.0E7``, ``1.0E-4``; the digits are the shortest that read back, as Java 19
    and later print them), a control character escaped with upper-case hex digits (``\\u001F``)."""
    return _JSON_TOKEN.sub(_java_token, _compact(value))


def _java_token(match: re.Match[str]) -> str:
    token = match.group()
    if token.startswith('"'):
        # an odd run of backslashes before u00xx is an escape; an even run is escaped backslashes
        return _CONTROL_ESCAPE.sub(
            lambda m: m.group() if len(m.group(1)) % 2 == 0 else f"{m.group(1)}u00{m.group(2).upper()}", token
        )
    if "." not in token and "e" not in token and "E" not in token:
        return token  # an integer: written as given
    return _java_double(float(token))


def _java_double(value: float) -> str:
    """Java's ``Double.toString``: plain from 10^-3 up to 10^7, else ``d.dddE[-]n``."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)  # Python writes these plainly too, with a fraction ("100.0", "-0.0")
    digits = decimal.Decimal(repr(abs(value))).normalize().as_tuple()
    text = "".join(str(d) for d in digits.digits)
    exponent = len(text) - 1 + int(digits.exponent)
    return f"{'-' if value < 0 else ''}{text[0]}.{text[1:] or '0'}E{exponent}"


class _Parser:
    """One parse: the named types seen so far (those of the references first)."""

    def __init__(self) -> None:
        self.named: dict[str, NamedType] = {}

    def parse_text(self, text: str) -> AvroType:
        return self.parse(_load(text), "", "", 0)

    def parse(self, value: Any, namespace: str, where: str, depth: int) -> AvroType:
        if depth > MAX_SCHEMA_DEPTH:
            raise InvalidSchemaError(f"schema nested deeper than {MAX_SCHEMA_DEPTH} at {where or '/'}")
        if isinstance(value, str):
            return self.reference(value, namespace, where)
        if isinstance(value, list):
            return self.union(value, namespace, where, depth)
        if not isinstance(value, dict):
            raise InvalidSchemaError(f"not a schema: {_compact(value)} at {where or '/'}")
        kind = value.get("type")
        if isinstance(kind, dict | list):  # {"type": {...}} is the inner schema (Java accepts it)
            return self.parse(kind, namespace, where, depth + 1)
        if not isinstance(kind, str):
            raise InvalidSchemaError(f"no type in {_compact(value)[:200]} at {where or '/'}")
        if kind in PRIMITIVES:
            props = {k: v for k, v in value.items() if k != "type"}
            return Primitive(kind, _logical(kind, props, None, where), props)
        if kind == "array":
            if "items" not in value:
                raise InvalidSchemaError(f"array without items at {where or '/'}")
            items = self.parse(value["items"], namespace, f"{where}/items", depth + 1)
            return Array(items, _props(value, {"type", "items"}))
        if kind == "map":
            if "values" not in value:
                raise InvalidSchemaError(f"map without values at {where or '/'}")
            values = self.parse(value["values"], namespace, f"{where}/values", depth + 1)
            return Map(values, _props(value, {"type", "values"}))
        if kind in ("record", "error"):
            return self.record(value, namespace, where, depth, is_error=kind == "error")
        if kind == "enum":
            return self.enum(value, namespace, where)
        if kind == "fixed":
            return self.fixed(value, namespace, where)
        return self.reference(kind, namespace, where)

    def reference(self, name: str, namespace: str, where: str) -> AvroType:
        if name in PRIMITIVES:
            return Primitive(name)
        candidates = [name] if "." in name or not namespace else [f"{namespace}.{name}", name]
        for candidate in candidates:
            if candidate in self.named:
                return self.named[candidate]
        raise InvalidSchemaError(f"unknown type name {name!r} at {where or '/'}")

    def union(self, branches: list[Any], namespace: str, where: str, depth: int) -> Union:
        parsed: list[AvroType] = []
        seen: set[str] = set()
        for i, branch in enumerate(branches):
            node = self.parse(branch, namespace, f"{where}/{i}", depth + 1)
            if isinstance(node, Union):
                raise InvalidSchemaError(f"a union may not contain a union, at {where}/{i}")
            key = node.fullname if isinstance(node, Record | Enum | Fixed) else node.type
            if key in seen:
                raise InvalidSchemaError(f"union holds {key} twice, at {where or '/'}")
            seen.add(key)
            parsed.append(node)
        return Union(tuple(parsed))

    def define(self, value: dict[str, Any], namespace: str, where: str) -> tuple[str, str, tuple[str, ...]]:
        """The full name of a named type being defined, its namespace (for what it encloses) and its
        aliases (full names)."""
        name = value.get("name")
        if not isinstance(name, str):
            raise InvalidSchemaError(f"{value.get('type')} without a name at {where or '/'}")
        ns = value.get("namespace")
        if ns is not None and not isinstance(ns, str):
            raise InvalidSchemaError(f"namespace of {name!r} is not a string at {where or '/'}")
        if "." in name:
            fullname = name
        else:
            space = namespace if ns is None else ns
            fullname = f"{space}.{name}" if space else name
        _check_fullname(fullname, where)
        if fullname.rpartition(".")[2] in PRIMITIVES:
            raise InvalidSchemaError(f"{fullname!r} redefines a primitive type, at {where or '/'}")
        if fullname in self.named:
            raise InvalidSchemaError(f"type {fullname!r} is defined twice, at {where or '/'}")
        enclosing = fullname.rpartition(".")[0]
        return fullname, enclosing, _aliases(value, enclosing, where)

    def record(self, value: dict[str, Any], namespace: str, where: str, depth: int, *, is_error: bool) -> Record:
        fullname, enclosing, aliases = self.define(value, namespace, where)
        fields_given = value.get("fields")
        if not isinstance(fields_given, list):
            raise InvalidSchemaError(f"record {fullname!r} has no list of fields at {where or '/'}")
        doc = value.get("doc")
        props = _props(value, {"type", "name", "namespace", "fields", "aliases", "doc"})
        node = Record(fullname, (), aliases, doc if isinstance(doc, str) else None, is_error, props)
        self.named[fullname] = node  # before the fields: they may refer to it
        fields: list[Field] = []
        names: set[str] = set()
        for i, given in enumerate(fields_given):
            at = f"{where}/fields/{i}"
            if not isinstance(given, dict):
                raise InvalidSchemaError(f"field {i} of {fullname!r} is not an object, at {at}")
            fname = given.get("name")
            if not isinstance(fname, str) or not _NAME.match(fname):
                raise InvalidSchemaError(f"invalid field name {fname!r} in {fullname!r}, at {at}")
            if fname in names:
                raise InvalidSchemaError(f"duplicate field {fname!r} in {fullname!r}, at {at}")
            names.add(fname)
            if "type" not in given:
                raise InvalidSchemaError(f"field {fname!r} of {fullname!r} has no type, at {at}")
            ftype = self.parse(given["type"], enclosing, f"{at}/type", depth + 1)
            default = given.get("default", NO_DEFAULT)
            if default is not NO_DEFAULT and not _valid_default(ftype, default, 0):
                raise InvalidSchemaError(
                    f"invalid default for field {fname!r} of {fullname!r}: {_compact(default)[:200]}"
                    f" is not a {_describe(ftype)}, at {at}"
                )
            order = given.get("order", "ascending")
            if order not in ("ascending", "descending", "ignore"):
                raise InvalidSchemaError(f"invalid order {order!r} of field {fname!r}, at {at}")
            faliases = given.get("aliases", [])
            if not isinstance(faliases, list) or not all(isinstance(a, str) and _NAME.match(a) for a in faliases):
                raise InvalidSchemaError(f"invalid aliases of field {fname!r}: {faliases!r}, at {at}")
            fdoc = given.get("doc")
            fprops = _props(given, {"name", "type", "default", "order", "aliases", "doc"})
            fields.append(
                Field(fname, ftype, default, tuple(faliases), order, fdoc if isinstance(fdoc, str) else None, fprops)
            )
        node.fields = tuple(fields)
        return node

    def enum(self, value: dict[str, Any], namespace: str, where: str) -> Enum:
        fullname, _, aliases = self.define(value, namespace, where)
        symbols = value.get("symbols")
        if not isinstance(symbols, list):
            raise InvalidSchemaError(f"enum {fullname!r} has no list of symbols, at {where or '/'}")
        for symbol in symbols:
            if not isinstance(symbol, str) or not _NAME.match(symbol):
                raise InvalidSchemaError(f"invalid symbol {symbol!r} in enum {fullname!r}, at {where or '/'}")
        seen: set[str] = set()
        duplicate = None
        for symbol in symbols:
            if symbol in seen:
                duplicate = symbol
                break
            seen.add(symbol)
        if duplicate is not None:
            raise InvalidSchemaError(f"duplicate symbol {duplicate!r} in enum {fullname!r}, at {where or '/'}")
        default = value.get("default")
        if default is not None and default not in symbols:
            raise InvalidSchemaError(
                f"default {default!r} of enum {fullname!r} is not one of its symbols, at {where or '/'}"
            )
        doc = value.get("doc")
        props = _props(value, {"type", "name", "namespace", "symbols", "default", "aliases", "doc"})
        node = Enum(fullname, tuple(symbols), default, aliases, doc if isinstance(doc, str) else None, props)
        self.named[fullname] = node
        return node

    def fixed(self, value: dict[str, Any], namespace: str, where: str) -> Fixed:
        fullname, _, aliases = self.define(value, namespace, where)
        size = value.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= _INT_RANGE[1]:
            raise InvalidSchemaError(f"fixed {fullname!r} has an invalid size {size!r}, at {where or '/'}")
        props = _props(value, {"type", "name", "namespace", "size", "aliases"})
        node = Fixed(fullname, size, aliases, _logical("fixed", props, size, where), props)
        self.named[fullname] = node
        return node


def _props(value: Mapping[str, Any], known: set[str]) -> dict[str, Any]:
    return {k: v for k, v in value.items() if k not in known}


def _check_fullname(fullname: str, where: str) -> None:
    for part in fullname.split("."):
        if not _NAME.match(part):
            raise InvalidSchemaError(f"invalid name {fullname!r} (at {part!r}), at {where or '/'}")


def _aliases(value: Mapping[str, Any], namespace: str, where: str) -> tuple[str, ...]:
    given = value.get("aliases", [])
    if not isinstance(given, list) or not all(isinstance(a, str) for a in given):
        raise InvalidSchemaError(f"invalid aliases {given!r}, at {where or '/'}")
    full = tuple(a if "." in a or not namespace else f"{namespace}.{a}" for a in given)
    for alias in full:
        _check_fullname(alias, where)
    return full


def _logical(kind: str, props: Mapping[str, Any], size: int | None, where: str) -> LogicalType | None:
    """The logical type of a node, when it applies to ``kind``; a decimal that breaks the rules is
    refused, any other logical type that does not apply is ignored (as the specification says)."""
    name = props.get("logicalType")
    if not isinstance(name, str):
        return None
    if name == "decimal" and kind in ("bytes", "fixed"):
        precision, scale = props.get("precision"), props.get("scale", 0)
        if not isinstance(precision, int) or isinstance(precision, bool) or precision <= 0:
            raise InvalidSchemaError(
                f"decimal precision must be a positive integer, not {precision!r}, at {where or '/'}"
            )
        if not isinstance(scale, int) or isinstance(scale, bool) or scale < 0:
            raise InvalidSchemaError(f"decimal scale must be a non-negative integer, not {scale!r}, at {where or '/'}")
        if scale > precision:
            raise InvalidSchemaError(
                f"decimal scale {scale} is greater than its precision {precision}, at {where or '/'}"
            )
        if size is not None:
            most = _most_digits(size)
            if most is not None and precision > most:
                raise InvalidSchemaError(
                    f"fixed({size}) cannot store {precision} digits of precision (at most {most}), at {where or '/'}"
                )
        return LogicalType("decimal", precision, scale)
    if kind in _LOGICAL_ON.get(name, ()):
        if name == "uuid" and kind == "fixed" and size != 16:
            return None
        if name == "duration" and size != 12:
            return None
        return LogicalType(name)
    return None


def _most_digits(size: int) -> int | None:
    """The decimal digits a fixed of ``size`` bytes holds, floor(log10(2^(8*size-1) - 1)) (the
    number's digits, less one); None past 128 bytes, where Java's double overflows to infinity and
    so bounds nothing."""
    if size <= 0:
        return 0
    if size > 128:
        return None
    return len(str(2 ** (8 * size - 1) - 1)) - 1


def _valid_default(node: AvroType, value: Any, depth: int, memo: dict[tuple[int, int], bool] | None = None) -> bool:
    """Whether ``value`` (JSON) is a default of ``node``, judged as Avro's Java library (1.12) judges
    it, which is what Confluent's registry accepts: a string for string, bytes, enum and fixed
    (their content is not checked there), an integral number in range for int and long, any number
    for float and double, a value of any branch for a union. Each (type, part of the value) pair is
    judged once (``memo``): unions of recursive records would otherwise try their branches
    exponentially often."""
    if depth > MAX_SCHEMA_DEPTH:
        return True  # a recursive default this deep is taken on trust rather than walked forever
    memo = {} if memo is None else memo
    key = (id(node), id(value))
    known = memo.get(key)
    if known is None:
        known = memo[key] = _judge_default(node, value, depth, memo)
    return known


def _judge_default(node: AvroType, value: Any, depth: int, memo: dict[tuple[int, int], bool]) -> bool:
    match node:
        case Primitive(type="null"):
            return value is None
        case Primitive(type="boolean"):
            return isinstance(value, bool)
        case Primitive(type="int"):
            return _integer(value, _INT_RANGE)
        case Primitive(type="long"):
            return _integer(value, _LONG_RANGE)
        case Primitive(type="float" | "double"):
            return isinstance(value, int | float) and not isinstance(value, bool)
        case Primitive(type="string" | "bytes") | Fixed() | Enum():
            return isinstance(value, str)
        case Array(items=items):
            return isinstance(value, list) and all(_valid_default(items, v, depth + 1, memo) for v in value)
        case Map(values=values):
            return isinstance(value, dict) and all(_valid_default(values, v, depth + 1, memo) for v in value.values())
        case Union(branches=branches):
            return any(_valid_default(b, value, depth + 1, memo) for b in branches)
        case Record(fields=fields):
            return isinstance(value, dict) and all(
                (f.name in value and _valid_default(f.type, value[f.name], depth + 1, memo))
                or (f.name not in value and f.has_default)
                for f in fields
            )
    return False


def _integer(value: Any, bounds: tuple[int, int]) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and bounds[0] <= value <= bounds[1]


def _describe(node: AvroType) -> str:
    if isinstance(node, Record | Enum | Fixed):
        return f"{node.type} {node.fullname}"
    if isinstance(node, Union):
        return "value of any branch of [" + ", ".join(_describe(b) for b in node.branches) + "]"
    return node.type


def named_types(node: AvroType) -> Iterator[NamedType]:
    """Every named type reachable from ``node``, each once, in the order of first use."""
    seen: set[int] = set()
    stack = [node]
    order: list[NamedType] = []
    while stack:
        current = stack.pop()
        if isinstance(current, Record | Enum | Fixed):
            if id(current) in seen:
                continue
            seen.add(id(current))
            order.append(current)
        if isinstance(current, Record):
            stack.extend(reversed([f.type for f in current.fields]))
        elif isinstance(current, Array):
            stack.append(current.items)
        elif isinstance(current, Map):
            stack.append(current.values)
        elif isinstance(current, Union):
            stack.extend(reversed(current.branches))
    return iter(order)


def _to_json(node: AvroType, seen: set[str]) -> Any:
    """The normal form of ``node``: full names, keys in one order, a named type defined at its first
    use and named after."""
    if isinstance(node, Primitive):
        return {"type": node.type, **dict(sorted(node.props.items()))} if node.props else node.type
    if isinstance(node, Array):
        return {"type": "array", "items": _to_json(node.items, seen), **dict(sorted(node.props.items()))}
    if isinstance(node, Map):
        return {"type": "map", "values": _to_json(node.values, seen), **dict(sorted(node.props.items()))}
    if isinstance(node, Union):
        return [_to_json(b, seen) for b in node.branches]
    if node.fullname in seen:
        return node.fullname
    seen.add(node.fullname)
    out: dict[str, Any] = {"type": "error" if isinstance(node, Record) and node.is_error else node.type}
    out["name"] = node.fullname
    if isinstance(node, Record):
        if node.doc is not None:
            out["doc"] = node.doc
        out["fields"] = [_field_json(f, seen) for f in node.fields]
    elif isinstance(node, Enum):
        if node.doc is not None:
            out["doc"] = node.doc
        out["symbols"] = list(node.symbols)
        if node.default is not None:
            out["default"] = node.default
    else:
        out["size"] = node.size
    if node.aliases:
        out["aliases"] = list(node.aliases)
    out.update(sorted(node.props.items()))
    return out


def _field_json(f: Field, seen: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f.name, "type": _to_json(f.type, seen)}
    if f.doc is not None:
        out["doc"] = f.doc
    if f.has_default:
        out["default"] = f.default
    if f.order != "ascending":
        out["order"] = f.order
    if f.aliases:
        out["aliases"] = list(f.aliases)
    out.update(sorted(f.props.items()))
    return out


#: attributes Java's Avro parser takes as the schema's own, never as properties (and so never writes
#: as properties): an attribute of these a type does not use (a "doc" on an array) is dropped
_RESERVED: Final = frozenset(
    {"doc", "fields", "items", "name", "namespace", "size", "symbols", "values", "type", "aliases"}
)
#: Avro's type names: a named type called so is always written by its full name
_TYPE_NAMES: Final = PRIMITIVES | {"record", "enum", "array", "map", "union", "fixed"}


def java_text(node: AvroType) -> str:
    """``node`` as Avro's Java library writes it on its own (``Schema.toString()``)."""
    return _java_text(_java_json(node, set(), ""))


def _java_json(node: AvroType, known: set[str], space: str) -> Any:
    """``node`` as Avro's Java library (1.11, 1.12) writes it (``Schema.toString()``), which is the
    text Confluent's registry stores: keys in Java's order, a named type defined at its first use
    and named after (by its short name within its namespace), a namespace written where it changes,
    attributes in the order given; ``known`` are the names already defined (the references'),
    ``space`` the enclosing namespace."""
    if isinstance(node, Primitive):
        props = _java_props(node.props)
        return {"type": node.type, **props} if props else node.type
    if isinstance(node, Array):
        return {"type": "array", "items": _java_json(node.items, known, space), **_java_props(node.props)}
    if isinstance(node, Map):
        return {"type": "map", "values": _java_json(node.values, known, space), **_java_props(node.props)}
    if isinstance(node, Union):
        return [_java_json(b, known, space) for b in node.branches]
    if node.fullname in known:
        return _qualified(node.fullname, space)
    known.add(node.fullname)
    out: dict[str, Any] = {"type": "error" if isinstance(node, Record) and node.is_error else node.type}
    out["name"] = node.name
    if node.namespace != space:
        out["namespace"] = node.namespace
    doc = node.doc if isinstance(node, Record | Enum) else node.props.get("doc")
    if isinstance(doc, str):
        out["doc"] = doc
    if isinstance(node, Record):
        out["fields"] = [_java_field(f, known, node.namespace) for f in node.fields]
    elif isinstance(node, Enum):
        out["symbols"] = list(node.symbols)
        if node.default is not None:
            out["default"] = node.default
    else:
        out["size"] = node.size
    out.update(_java_props(node.props))
    if node.aliases:
        out["aliases"] = [_qualified(alias, node.namespace) for alias in node.aliases]
    return out


def _java_field(f: Field, known: set[str], space: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f.name, "type": _java_json(f.type, known, space)}
    if f.doc is not None:
        out["doc"] = f.doc
    if f.has_default:
        out["default"] = f.default
    if f.order != "ascending":
        out["order"] = f.order
    if f.aliases:
        out["aliases"] = list(f.aliases)
    out.update(f.props)
    return out


def _java_props(props: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in props.items() if k not in _RESERVED}


def _qualified(fullname: str, space: str) -> str:
    """A name as Java writes a use of it within ``space``: short when its namespace is that one
    (unless the short name is a type's name), else full."""
    namespace, _, name = fullname.rpartition(".")
    return name if namespace and namespace == space and name not in _TYPE_NAMES else fullname


def _pcf(node: AvroType, seen: set[str]) -> Any:
    """The Parsing Canonical Form (the specification's [PRIMITIVES], [FULLNAMES], [STRIP], [ORDER])."""
    if isinstance(node, Primitive):
        return node.type
    if isinstance(node, Array):
        return {"type": "array", "items": _pcf(node.items, seen)}
    if isinstance(node, Map):
        return {"type": "map", "values": _pcf(node.values, seen)}
    if isinstance(node, Union):
        return [_pcf(b, seen) for b in node.branches]
    if node.fullname in seen:
        return node.fullname
    seen.add(node.fullname)
    if isinstance(node, Record):
        fields = [{"name": f.name, "type": _pcf(f.type, seen)} for f in node.fields]
        return {"name": node.fullname, "type": "error" if node.is_error else "record", "fields": fields}
    if isinstance(node, Enum):
        return {"name": node.fullname, "type": "enum", "symbols": list(node.symbols)}
    return {"name": node.fullname, "type": "fixed", "size": node.size}


_EMPTY64: Final = 0xC15D213AA4D7A795


def _rabin_table() -> tuple[int, ...]:
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (_EMPTY64 & -(fp & 1))
        table.append(fp)
    return tuple(table)


_RABIN: Final = _rabin_table()


def fingerprint64(data: bytes) -> int:
    """The CRC-64-AVRO (Rabin) fingerprint of ``data``, as an unsigned 64-bit integer."""
    fp = _EMPTY64
    for byte in data:
        fp = (fp >> 8) ^ _RABIN[(fp ^ byte) & 0xFF]
    return fp
