"""NodeColumns: a graph's nodes read from their protobuf once, one field at a time, into
lists (names, op types, domains, inputs, outputs), every value numbered, and each input's
value and making node as numpy arrays; `NodeList`, the `Node` objects made when looked up.

Reading 100k NodeProtos is the least that opening a big graph costs (every field read is a
call into the protobuf library). What opening needs besides (producers, groups, folding, the
top level's edges) is computed from these columns by C-level builtins and numpy rather than
a Python object or a dict look-up per node: one pass numbers the values the nodes read, and
everything after works on those numbers. So a graph opens at close to the cost of reading it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from itertools import chain, repeat
from operator import attrgetter
from typing import Any, overload

from onnx_studio.engine.graph.nodes import Node

_FIELDS = attrgetter("name", "op_type")
_DOMAIN = attrgetter("domain")


class NodeColumns:
    """The nodes of one graph as columns.

    Values are numbered: the outputs of the nodes by their place in the flat list of outputs
    (`made`: value number -> its node, for numbers below `n_made`), then the `known` names
    given (initializers, graph inputs) and "", then the values read but made nowhere here
    (`outer`: an enclosing graph's). `value_names[v]` is the name of number v. Per (node,
    input) pair, in graph order: `input_value` (its number), `input_node` (the node reading
    it) and `input_source` (the node making it, -1 for none).
    """

    def __init__(self, protos: Sequence[Any], known: Iterable[str] = ()) -> None:
        import numpy as np  # lazily: the window shows before numpy is needed

        self.protos = protos
        n = len(protos)
        fields = list(zip(*map(_FIELDS, protos), strict=True)) if n else [()] * 2
        self.names: Sequence[str] = fields[0]
        self.op_types: Sequence[str] = fields[1]
        self._domains: Sequence[str] | None = None  # read when first asked for
        # a list per node, and one of them all sharing its strings (hashed once)
        self.inputs: list[list[str]] = [p.input[:] for p in protos]
        self.outputs: list[list[str]] = [p.output[:] for p in protos]
        flat_inputs: list[str] = list(chain.from_iterable(self.inputs))
        flat_outputs: list[str] = list(chain.from_iterable(self.outputs))
        nodes = np.arange(n)
        n_inputs = np.fromiter(map(len, self.inputs), np.int64, n)
        self.input_start = np.concatenate(([0], np.cumsum(n_inputs)))  # node -> first pair
        self.input_node = np.repeat(nodes, n_inputs)
        self.made = np.repeat(nodes, np.fromiter(map(len, self.outputs), np.int64, n))
        self.n_made = len(flat_outputs)
        # a later node making the same value wins, as a walk of the graph would have it
        ids = dict(zip(flat_outputs, range(self.n_made), strict=True))
        ids.pop("", None)  # "" names an absent optional input or output: made by none
        # no value made twice (as ONNX requires): a value's number is its output's place
        self.unique_made = len(ids) == self.n_made - flat_outputs.count("")
        names = list(flat_outputs)
        numbers = []
        for name in chain(known, ("",)):
            v = ids.get(name)
            if v is None:
                v = ids[name] = len(names)
                names.append(name)
            numbers.append(v)
        self.known_values = np.array(numbers[:-1], dtype=np.int64)  # `known`'s numbers
        self.n_known = len(names)
        # op types numbered: `op_code` per node, `op_names` the types in first-seen order
        self.op_names = list(dict.fromkeys(self.op_types))
        number = {op: k for k, op in enumerate(self.op_names)}
        self.op_code = np.fromiter(map(number.__getitem__, self.op_types), np.int64, n)
        value = np.array(list(map(ids.get, flat_inputs, repeat(-1))), dtype=np.int64)
        for p in np.flatnonzero(value < 0).tolist():  # read, made nowhere here
            name = flat_inputs[p]
            v = ids.get(name)
            if v is None:
                v = ids[name] = len(names)
                names.append(name)
            value[p] = v
        self.value_ids = ids
        self.value_names = names
        self.input_value = value
        self.flat_inputs = flat_inputs
        made = self.input_value < self.n_made
        self.input_source = np.where(made, self.made[np.where(made, self.input_value, 0)]
                                     if self.n_made else 0, -1)
        self._producer: dict[str, int] | None = None

    def __len__(self) -> int:
        return len(self.names)

    @property
    def domains(self) -> Sequence[str]:
        """Each node's operator domain ("" for ONNX's own)."""
        if self._domains is None:
            self._domains = list(map(_DOMAIN, self.protos))
        return self._domains

    def domains_of(self, nodes: Sequence[int]) -> list[str]:
        """The domains of a few nodes (read from their protobuf unless all are read)."""
        if self._domains is not None:
            return list(map(self._domains.__getitem__, nodes))
        return [self.protos[i].domain for i in nodes]

    @property
    def outer(self) -> list[str]:
        """The values read but made nowhere in this graph and not `known`, in the order
        they are first read."""
        return self.value_names[self.n_known:]

    @property
    def producer(self) -> dict[str, int]:
        """Value -> the node making it (built on first use)."""
        if self._producer is None:
            names = self.value_names
            made = self.made.tolist()
            self._producer = {names[v]: made[v] for v in self.value_ids.values()
                              if v < self.n_made}
        return self._producer

    @property
    def made_count(self) -> int:
        """How many values (distinct names) the nodes make."""
        return len(self.value_ids) - (len(self.value_names) - self.n_made)

    def made_by(self, name: str) -> int | None:
        """The node making value `name`, or None."""
        v = self.value_ids.get(name)
        return int(self.made[v]) if v is not None and v < self.n_made else None

    def consumers(self) -> dict[str, list[int]]:
        """Value -> the nodes reading it, in graph order (a node reading it twice, twice);
        values in the order they are first read."""
        out: dict[str, list[int]] = {}
        get = out.get
        for t, i in zip(self.flat_inputs, self.input_node.tolist(), strict=True):
            users = get(t)
            if users is None:
                out[t] = [i]
            else:
                users.append(i)
        out.pop("", None)
        return out

    def op_mask(self, ops: Collection[str]) -> Any:
        """A numpy bool per node: True for the nodes whose op type is one of `ops`."""
        import numpy as np

        return np.array([op in ops for op in self.op_names] + [False], dtype=bool)[
            self.op_code]

    def consumers_of(self, values: Collection[str]) -> dict[str, list[int]]:
        """`consumers()` of a few values only."""
        import numpy as np

        ids = self.value_ids
        wanted = [ids[t] for t in values if t and t in ids]
        out: dict[str, list[int]] = {}
        if not wanted:
            return out
        where = np.flatnonzero(np.isin(self.input_value, wanted))
        names = self.value_names
        for v, i in zip(self.input_value[where].tolist(), self.input_node[where].tolist(),
                        strict=True):
            out.setdefault(names[v], []).append(i)
        return out

    def value_mask(self, names: Iterable[str]) -> Any:
        """A numpy bool per value number: True for the `names` given."""
        import numpy as np

        mask = np.zeros(len(self.value_names), dtype=bool)
        ids = self.value_ids
        mask[[ids[t] for t in names if t in ids]] = True
        return mask


class NodeList(Sequence[Node]):
    """The graph's `Node`s, each made from the columns when first looked up and kept (a
    view asks for the few it shows; iterating makes them all)."""

    def __init__(self, columns: NodeColumns, groups: Mapping[str, object], code: Any) -> None:
        self._columns = columns
        # a node's module group: its place (`code`, numpy) among the `groups` ids (no
        # reference to the model: a shown graph is freed by reference counting alone)
        self._groups = groups
        self._code = code
        self._gids: list[str] | None = None
        self._made: list[Node | None] = [None] * len(columns)
        self._all = False

    def _group_of(self, i: int) -> str:
        if self._gids is None:
            self._gids = list(self._groups)
        return self._gids[self._code[i]]

    def __len__(self) -> int:
        return len(self._made)

    def _make(self, i: int) -> Node:
        node = self._made[i]
        if node is None:
            c = self._columns
            node = self._made[i] = Node(i, c.protos[i], c.names[i], c.op_types[i],
                                        c.domains[i], c.inputs[i], c.outputs[i],
                                        self._group_of(i))
        return node

    @overload
    def __getitem__(self, i: int) -> Node: ...

    @overload
    def __getitem__(self, i: slice) -> list[Node]: ...

    def __getitem__(self, i: int | slice) -> Node | list[Node]:
        if isinstance(i, slice):
            return [self._make(j) for j in range(*i.indices(len(self._made)))]
        if i < 0:
            i += len(self._made)
        if not 0 <= i < len(self._made):
            raise IndexError(i)
        return self._make(i)

    def __iter__(self) -> Iterator[Node]:
        if not self._all:  # make them all in one pass
            c, made = self._columns, self._made
            if self._gids is None:
                self._gids = list(self._groups)
            group = map(self._gids.__getitem__, self._code.tolist())
            for i, (node, *fields) in enumerate(zip(made, c.protos, c.names, c.op_types,
                                                    c.domains, c.inputs, c.outputs, group,
                                                    strict=True)):
                if node is None:
                    made[i] = Node(i, *fields)
            self._all = True
        return iter(self._made)  # type: ignore[arg-type]  # every one made above
