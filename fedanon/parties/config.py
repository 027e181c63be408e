"""Party and run configuration files (TOML): loading, validation and writing.

A party config is everything one institution decides on its own: its identity,
listen address, TLS material, whom it trusts (peers and coordinators by name)
and where its data lives. A run config is what a coordinator asks for. Relative
paths are resolved against the directory of the config file, so a config and
its certificates/data can be moved together. Every error names the file and key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from fedanon.model.config import FIELDS as CONFIG_FIELDS, AnonymizationConfig
from fedanon.model.registry import model_types
from fedanon.data.io.delimited import check_encoding, parse_delimiter
from fedanon.engine.settings import EngineSettings
from fedanon.errors import InputError, clip
from fedanon.kit.suggest import check_known_keys
from fedanon.kit.tomlfile import load_toml_file
from fedanon.protocols.registry import PARTY_ROLES, PRIMARY
from fedanon.parties.pki.certs import check_party_name
from fedanon.parties.pki.revocation import load_revoked

DEFAULT_CHUNK_BYTES = 1 << 20
DEFAULT_MAX_PAYLOAD_BYTES = 4 << 30


@dataclass
class TlsFiles:
    cert: Path
    key: Path
    ca: Path
    revoked: Path | None = None  # deny-list of certificate fingerprints (`parties/revocation.py`)

    def revoked_fingerprints(self) -> frozenset[str]:
        """The fingerprints of the revocation list (empty without one); InputError naming file and line."""
        return load_revoked(self.revoked)

    def read(self) -> tuple[bytes, bytes, bytes]:
        """(cert, key, ca) PEM bytes; a missing file is an InputError naming it."""
        out = []
        for label, path in (("cert", self.cert), ("key", self.key), ("ca", self.ca)):
            try:
                out.append(path.read_bytes())
            except OSError as exc:
                raise InputError(f"cannot read TLS {label} file {path}: {exc.strerror}") from None
        return out[0], out[1], out[2]


@dataclass
class DataConfig:
    csv: Path
    delimiter: str = ";"
    quasi_identifiers: dict[str, Path] = field(default_factory=dict)
    sensitive: dict[str, Path | None] = field(default_factory=dict)
    tid_column: str | None = None
    subset_column: str | None = None
    insensitive: list[str] = field(default_factory=list)  # released unchanged
    encoding: str = "utf-8"
    hierarchy_delimiter: str | None = None  # None: `delimiter`


@dataclass
class Limits:
    """What a daemon (or coordinator) accepts and how long it waits; the README has the table.

    Sizes are held in bytes; the TOML keys are in KiB/MiB (`LIMIT_KEYS`). Each limit has a
    plausible range (`LIMIT_BOUNDS`, noted beside each field): `validate` refuses values outside
    it, since such a daemon would not fail cleanly but misbehave later.
    """

    chunk_bytes: int = DEFAULT_CHUNK_BYTES    # one gRPC message of a stream (16 KiB..16 MiB)
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES  # one protocol message, held whole (1 MiB..64 GiB)
    rpc_timeout_s: float = 30.0  # one control RPC; a message gets this plus its size at 2 MiB/s (1 s..1 day)
    heartbeat_s: float = 2.0     # a waiting party pings its peers this often; no answer within it = unresponsive
    #                              (0.1 s..1 h: faster floods the peers, slower leaves a stopped peer unnoticed)
    max_streams_per_peer: int = 8             # open messages (Deliver streams, Posts) one peer may hold here (1..256:
    #                                           each may hold a server thread, and the pool grows with it)
    max_run_buffer_bytes: int = 2 << 30       # bytes buffered (received, not yet consumed) for one run (1 MiB..1 TiB)
    max_buffer_bytes: int = 4 << 30           # the same over all runs of this daemon (1 MiB..1 TiB)
    idle_stream_s: float = 60.0               # a message stream with no chunk for this long is cut (0.5 s..1 day)
    max_decompressed_bytes: int = 4 << 30     # a Snappy block may declare at most this many bytes (1 MiB..64 GiB)
    prepared_ttl_s: float = 600.0             # a prepared run not started within this is dropped (1 s..7 days)
    receive_timeout_s: float = 300.0          # run config: how long one protocol step may wait for a peer
    #                                           (1 s..7 days)

    def validate(self, where: str = "limits") -> "Limits":
        """InputError naming the key for a limit that is not a number, or outside its plausible range
        (`LIMIT_BOUNDS`, in the TOML key's unit); also checked at daemon start-up."""
        for key, (attr, unit, kind) in LIMIT_KEYS.items():
            value = getattr(self, attr)
            if kind is float:
                if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) \
                        or value <= 0:
                    raise InputError(f"{where}: limits.{key} must be a positive, finite number of seconds, got {value!r}")
            elif not isinstance(value, int) or isinstance(value, bool) or value < unit:
                raise InputError(f"{where}: limits.{key} must be a positive whole number, got {value!r} bytes")
            low, high, why = LIMIT_BOUNDS[key]
            shown = value / unit if kind is int and unit > 1 else value
            if not low <= shown <= high:
                raise InputError(f"{where}: limits.{key} = {shown:g} is implausible: it must be within "
                                 f"{low:g}..{high:g} ({why})")
        return self


# TOML key -> (lowest, highest plausible value in the key's unit, why). Outside these a daemon
# would not fail cleanly later -- it would flood its peers, starve itself of threads or memory,
# or never notice a dead peer -- so `check-config` and start-up refuse them
# (docs/security-deviations.md has the same table).
LIMIT_BOUNDS: dict[str, tuple[float, float, str]] = {
    "chunk_kib": (16, 16384, "gRPC message size per chunk"),
    "max_payload_mib": (1, 65536, "one protocol message is held in memory whole"),
    "rpc_timeout_s": (1, 86400, "below 1 s a loaded host fails control calls; a day is no longer a timeout"),
    "heartbeat_s": (0.1, 3600, "below 0.1 s the pings of every waiting party flood its peers; "
                               "above an hour a stopped peer goes unnoticed"),
    "max_streams_per_peer": (1, 256, "every stream may hold one server thread; the pool grows with this"),
    "max_run_buffer_mib": (1, 1048576, "bytes buffered in memory for one run"),
    "max_buffer_mib": (1, 1048576, "bytes buffered in memory over all runs"),
    "idle_stream_s": (0.5, 86400, "below 0.5 s streams are cut between two chunks on a loaded host"),
    "max_decompressed_mib": (1, 65536, "an expanded Snappy block is held in memory whole"),
    "prepared_ttl_s": (1, 7 * 86400, "a prepared run must survive its own start; a week is no longer a limit"),
    "receive_timeout_s": (1, 7 * 86400, "one protocol step's wait for a peer that makes no progress"),
}

# TOML key -> (Limits attribute, unit in bytes (1 for counts) or 0 for seconds, type)
LIMIT_KEYS: dict[str, tuple[str, int, type]] = {
    "chunk_kib": ("chunk_bytes", 1 << 10, int),
    "max_payload_mib": ("max_payload_bytes", 1 << 20, int),
    "rpc_timeout_s": ("rpc_timeout_s", 0, float),
    "heartbeat_s": ("heartbeat_s", 0, float),
    "max_streams_per_peer": ("max_streams_per_peer", 1, int),
    "max_run_buffer_mib": ("max_run_buffer_bytes", 1 << 20, int),
    "max_buffer_mib": ("max_buffer_bytes", 1 << 20, int),
    "idle_stream_s": ("idle_stream_s", 0, float),
    "max_decompressed_mib": ("max_decompressed_bytes", 1 << 20, int),
    "prepared_ttl_s": ("prepared_ttl_s", 0, float),
    "receive_timeout_s": ("receive_timeout_s", 0, float),
}


@dataclass
class PartyConfig:
    name: str
    listen: str
    tls: TlsFiles
    peers: dict[str, str]             # allow-listed party name -> address
    coordinators: list[str]           # names allowed to start runs
    data: DataConfig | None = None
    limits: Limits = field(default_factory=Limits)
    source: Path | None = None
    # where this party's engine groups rows when its role runs the search ([engine]); its own
    # compute, so it stays here and never travels with a run
    engine: EngineSettings = field(default_factory=EngineSettings)


@dataclass
class RunPartyEntry:
    name: str
    address: str
    role: str


@dataclass
class RunConfig:
    coordinator: str
    tls: TlsFiles
    protocol: str
    distribution: str
    parties: list[RunPartyEntry]
    result_recipient: str
    privacy: dict[str, Any]
    options: dict[str, Any]
    output: Path | None
    report: Path | None
    run_id: str | None = None
    limits: Limits = field(default_factory=Limits)
    source: Path | None = None
    # `privacy` parsed, where the caller holds it already (e.g. validated from flags): the
    # coordinator then neither parses nor validates it again; it must describe the same config
    anonymization: AnonymizationConfig | None = None


# ----------------------------------------------------------------------------- helpers

def _load_toml(path: Path) -> dict[str, Any]:
    return load_toml_file(path, "config file")


class _Section:
    """Typed access to one TOML table with errors naming file and key."""

    def __init__(self, data: Any, path: Path, prefix: str) -> None:
        if not isinstance(data, dict):
            raise InputError(f"{path}: [{prefix}] must be a table")
        self.data, self.path, self.prefix = data, path, prefix

    def _key(self, key: str) -> str:
        return f"{self.prefix}.{key}" if self.prefix else key

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = ..., ) -> Any:
        if key not in self.data:
            if default is ...:
                raise InputError(f"{self.path}: missing required key {self._key(key)!r}")
            return default
        value = self.data[key]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise InputError(f"{self.path}: key {self._key(key)!r} has the wrong type ({value!r})")
        return value

    def path_value(self, key: str, default: Any = ...) -> Path | None:
        value = self.get(key, str, default)
        return None if value is None else resolve(self.path, value)

    def table(self, key: str, required: bool = True) -> "_Section | None":
        if key not in self.data:
            if required:
                raise InputError(f"{self.path}: missing section [{self._key(key)}]")
            return None
        return _Section(self.data[key], self.path, self._key(key))


def resolve(config_path: Path, value: str) -> Path:
    if "\0" in value:
        raise InputError(f"{config_path}: path {clip(value.replace(chr(0), '<NUL>'))!r} contains a NUL character")
    p = Path(value).expanduser()
    return p if p.is_absolute() else (config_path.parent / p).resolve()


def check_address(path: Path, key: str, address: str) -> str:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise InputError(f"{path}: {key} = {address!r} is not HOST:PORT")
    return address


def _tls(section: _Section) -> TlsFiles:
    return TlsFiles(
        cert=section.path_value("cert"), key=section.path_value("key"), ca=section.path_value("ca"),
        revoked=section.path_value("revoked", None),
    )


def _tls_dict(tls: TlsFiles) -> dict[str, str]:
    out = {"cert": str(tls.cert), "key": str(tls.key), "ca": str(tls.ca)}
    if tls.revoked is not None:
        out["revoked"] = str(tls.revoked)
    return out


def _limits(section: _Section | None) -> Limits:
    limits = Limits()
    if section is None:
        return limits
    unknown = sorted(set(section.data) - set(LIMIT_KEYS))
    if unknown:
        raise InputError(f"{section.path}: unknown key limits.{str(unknown[0])[:60]} "
                         f"(known: {', '.join(LIMIT_KEYS)})")
    for key, (attr, unit, kind) in LIMIT_KEYS.items():
        if key not in section.data:
            continue
        value = section.get(key, kind)
        if kind is int:
            if value <= 0 or value > (1 << 62) // max(unit, 1):
                raise InputError(f"{section.path}: limits.{key} must be a positive whole number, got {value!r}")
            value *= unit
        setattr(limits, attr, value)
    return limits.validate(str(section.path))


# ----------------------------------------------------------------------------- party config

PARTY_CONFIG_KEYS: dict[str, tuple[str, ...]] = {
    "": ("party", "tls", "peers", "data", "limits", "engine"),
    "party": ("name", "listen", "coordinators"),
    "engine": ("backend", "workers", "scheduler"),
    "tls": ("cert", "key", "ca", "revoked"),
    "data": tuple(f.name for f in fields(DataConfig)),
}  # [peers], [data.quasi_identifiers] and [data.sensitive] are keyed by party and column names


def _check_party_keys(path: Path, doc: dict[str, Any]) -> None:
    """Every key of a party config known: a misspelled `insensitve` must not silently drop a column."""
    for table, known in PARTY_CONFIG_KEYS.items():
        section = doc if not table else doc.get(table)
        if isinstance(section, dict):
            check_known_keys(path, table, section, known)


def load_party_config(path: Path) -> PartyConfig:
    path = Path(path).resolve()
    root = _Section(_load_toml(path), path, "")
    _check_party_keys(path, root.data)
    party = root.table("party")
    name = check_party_name(party.get("name", str))
    listen = check_address(path, "party.listen", party.get("listen", str))
    peers_section = root.table("peers", required=False)
    peers: dict[str, str] = {}
    if peers_section is not None:
        for peer, address in peers_section.data.items():
            check_party_name(peer)
            if not isinstance(address, str):
                raise InputError(f"{path}: peers.{peer} must be an address string \"HOST:PORT\"")
            peers[peer] = check_address(path, f"peers.{peer}", address)
    coordinators = party.get("coordinators", list, [])
    for c in coordinators:
        if not isinstance(c, str):
            raise InputError(f"{path}: party.coordinators must be a list of names")
        check_party_name(c)
    data = None
    data_section = root.table("data", required=False)
    if data_section is not None:
        qis_section = data_section.table("quasi_identifiers", required=False)
        sens_section = data_section.table("sensitive", required=False)
        qis = {str(k): resolve(path, v) for k, v in (qis_section.data.items() if qis_section else [])
               if isinstance(v, str) or _bad(path, f"data.quasi_identifiers.{k}", "a hierarchy CSV path")}
        sensitive: dict[str, Path | None] = {}
        for k, v in (sens_section.data.items() if sens_section else []):
            if not isinstance(v, str):
                _bad(path, f"data.sensitive.{k}", 'a hierarchy CSV path or "" for none')
            sensitive[str(k)] = resolve(path, v) if v else None
        insensitive = data_section.get("insensitive", list, [])
        if not all(isinstance(n, str) and n for n in insensitive):
            raise InputError(f"{path}: data.insensitive must be a list of column names")
        hierarchy_delimiter = data_section.get("hierarchy_delimiter", str, None)
        data = DataConfig(
            csv=data_section.path_value("csv"),
            delimiter=parse_delimiter(data_section.get("delimiter", str, ";"), f"{path}: data.delimiter"),
            quasi_identifiers=qis,
            sensitive=sensitive,
            tid_column=data_section.get("tid_column", str, None),
            subset_column=data_section.get("subset_column", str, None),
            insensitive=list(insensitive),
            encoding=check_encoding(data_section.get("encoding", str, "utf-8"), f"{path}: data.encoding"),
            hierarchy_delimiter=(parse_delimiter(hierarchy_delimiter, f"{path}: data.hierarchy_delimiter")
                                 if hierarchy_delimiter is not None else None),
        )
        for column in data.insensitive:
            if column in qis or column in sensitive:
                raise InputError(f"{path}: column {column!r} is in data.insensitive and also a "
                                 f"{'quasi-identifier' if column in qis else 'sensitive column'}")
    return PartyConfig(
        name=name, listen=listen, tls=_tls(root.table("tls")), peers=peers, coordinators=list(coordinators),
        data=data, limits=_limits(root.table("limits", required=False)), source=path,
        engine=_engine(root.table("engine", required=False)),
    )


def _engine(section: _Section | None) -> EngineSettings:
    """The [engine] table: `backend`, `workers` (a number or "auto"), `scheduler` (a Dask address)."""
    if section is None:
        return EngineSettings()
    default = EngineSettings()
    return EngineSettings(
        backend=section.get("backend", str, default.backend),
        workers=section.get("workers", (int, str), default.workers),
        scheduler=section.get("scheduler", str, None),
    ).validate(str(section.path))


def _bad(path: Path, key: str, expected: str) -> bool:
    raise InputError(f"{path}: {key} must be {expected}")


def limits_dict(limits: Limits) -> dict[str, int | float]:
    """The [limits] table for `limits` (sizes back in their TOML units)."""
    return {key: (getattr(limits, attr) // unit if kind is int else getattr(limits, attr))
            for key, (attr, unit, kind) in LIMIT_KEYS.items()}


def party_config_dict(cfg: PartyConfig) -> dict[str, Any]:
    """The TOML-able form of a party config (absolute paths); used by the simulation harness."""
    out: dict[str, Any] = {
        "party": {"name": cfg.name, "listen": cfg.listen, "coordinators": list(cfg.coordinators)},
        "tls": _tls_dict(cfg.tls),
        "peers": dict(cfg.peers),
        "limits": limits_dict(cfg.limits),
    }
    if not cfg.engine.is_default:
        out["engine"] = cfg.engine.as_dict()
    if cfg.data is not None:
        data: dict[str, Any] = {
            "csv": str(cfg.data.csv),
            "delimiter": cfg.data.delimiter,
            "quasi_identifiers": {k: str(v) for k, v in cfg.data.quasi_identifiers.items()},
            "sensitive": {k: (str(v) if v else "") for k, v in cfg.data.sensitive.items()},
        }
        if cfg.data.tid_column:
            data["tid_column"] = cfg.data.tid_column
        if cfg.data.subset_column:
            data["subset_column"] = cfg.data.subset_column
        if cfg.data.insensitive:
            data["insensitive"] = list(cfg.data.insensitive)
        if cfg.data.encoding != "utf-8":
            data["encoding"] = cfg.data.encoding
        if cfg.data.hierarchy_delimiter:
            data["hierarchy_delimiter"] = cfg.data.hierarchy_delimiter
        out["data"] = data
    return out


# ----------------------------------------------------------------------------- run config

RUN_CONFIG_KEYS: dict[str, tuple[str, ...]] = {
    "": ("run", "coordinator", "parties", "privacy", "options", "limits"),
    "run": ("protocol", "distribution", "result_recipient", "output", "report", "run_id"),
    "coordinator": ("name", "cert", "key", "ca", "revoked"),
}


def privacy_keys() -> dict[str, tuple[str, ...]]:
    """[privacy] is an AnonymizationConfig: its settings, one table per registered model (with that
    model's fields), or a `models` list."""
    types = model_types()
    out = {"privacy": (*CONFIG_FIELDS, "models", *types)}
    out.update({f"privacy.{key}": tuple(f.name for f in fields(model)) for key, model in types.items()})
    return out


def _check_run_keys(path: Path, doc: dict[str, Any]) -> None:
    """Every key of a run config known (a misspelled `ouput` or `supression` is not silently ignored)."""
    for table, known in RUN_CONFIG_KEYS.items():
        section = doc if not table else doc.get(table)
        if isinstance(section, dict):
            check_known_keys(path, table, section, known)
    for name, entry in (doc.get("parties") or {}).items() if isinstance(doc.get("parties"), dict) else ():
        if isinstance(entry, dict):
            check_known_keys(path, f"parties.{name}", entry, ("address", "role"))
    privacy = doc.get("privacy")
    if isinstance(privacy, dict):
        for table, known in privacy_keys().items():
            section = privacy if table == "privacy" else privacy.get(table.partition(".")[2])
            if isinstance(section, dict):
                check_known_keys(path, table, section, known)


def load_run_config(path: Path) -> RunConfig:
    path = Path(path).resolve()
    root = _Section(_load_toml(path), path, "")
    _check_run_keys(path, root.data)
    run = root.table("run")
    coord = root.table("coordinator")
    parties_section = root.table("parties")
    parties: list[RunPartyEntry] = []
    for name, entry in parties_section.data.items():
        check_party_name(name)
        sec = _Section(entry, path, f"parties.{name}")
        role = sec.get("role", str)
        if role not in PARTY_ROLES:
            raise InputError(f"{path}: parties.{name}.role must be one of {', '.join(map(repr, PARTY_ROLES))}, "
                             f"got {role!r}")
        parties.append(RunPartyEntry(name, check_address(path, f"parties.{name}.address", sec.get("address", str)), role))
    if len(parties) < 2:
        raise InputError(f"{path}: a run needs at least two parties in [parties]")
    recipient = run.get("result_recipient", str, "")
    if not recipient:
        recipient = next((p.name for p in parties if p.role == PRIMARY), "")
    if recipient not in {p.name for p in parties}:
        raise InputError(f"{path}: run.result_recipient {recipient!r} is not one of the parties")
    distribution = run.get("distribution", str, "horizontal")
    if distribution not in ("horizontal", "vertical", "hybrid"):
        raise InputError(f"{path}: run.distribution must be \"horizontal\", \"vertical\" or \"hybrid\", got {distribution!r}")
    privacy = root.data.get("privacy", {})
    options = root.data.get("options", {})
    if not isinstance(privacy, dict) or not isinstance(options, dict):
        raise InputError(f"{path}: [privacy] and [options] must be tables")
    return RunConfig(
        coordinator=check_party_name(coord.get("name", str)),
        tls=_tls(coord),
        protocol=run.get("protocol", str),
        distribution=distribution,
        parties=parties,
        result_recipient=recipient,
        privacy=privacy,
        options=options,
        output=run.path_value("output", None),
        report=run.path_value("report", None),
        run_id=run.get("run_id", str, None),
        limits=_limits(root.table("limits", required=False)),
        source=path,
    )


def run_config_dict(cfg: RunConfig) -> dict[str, Any]:
    """The TOML-able form of a run config (what `fedanon run --config` reads)."""
    run: dict[str, Any] = {"protocol": cfg.protocol, "distribution": cfg.distribution,
                           "result_recipient": cfg.result_recipient}
    if cfg.output is not None:
        run["output"] = str(cfg.output)
    if cfg.report is not None:
        run["report"] = str(cfg.report)
    if cfg.run_id:
        run["run_id"] = cfg.run_id
    out: dict[str, Any] = {
        "run": run,
        "coordinator": {"name": cfg.coordinator, **_tls_dict(cfg.tls)},
        "parties": {p.name: {"address": p.address, "role": p.role} for p in cfg.parties},
    }
    if cfg.privacy:
        out["privacy"] = _drop_none(cfg.privacy)  # TOML has no null: an absent key means "not set"
    if cfg.options:
        out["options"] = cfg.options
    return out


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value
