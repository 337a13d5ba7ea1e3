"""Kafka's keystores and truststores for Python's `ssl`: the `ssl.keystore.*` /
`ssl.truststore.*` settings of a broker listener or a client, in the three formats Kafka
reads: PEM (files or inline), PKCS12 and JKS (Kafka's default type; `keytool`'s before
Java 9). Python's ssl takes PEM files only, so a PKCS12 or JKS key and its chain are
handed to it through a private temporary file (in /dev/shm where there is one),
removed as soon as it is loaded.

A store's type is read from its first bytes when `ssl.*store.type` is not set (a JKS
store starts with 0xFEEDFEED, PKCS12 is DER: a SEQUENCE, 0x30; anything else is read as
PEM text); a type that is set must match them. PKCS12 needs the `cryptography` package; JKS and PEM need nothing more."""

from __future__ import annotations

import hashlib
import os
import ssl
import stat
import struct
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass

JKS_MAGIC = b"\xfe\xed\xfe\xed"
# Sun's proprietary key protection in JKS private key entries (KeyProtector): OID
# 1.3.6.1.4.1.42.2.17.1.1, DER-encoded.
_JKS_KEY_PROTECTOR_OID = bytes.fromhex("060a2b060104012a02110101")
_JKS_INTEGRITY_SALT = b"Mighty Aphrodite"  # what keytool mixes into a JKS store's digest
TYPES = ("PEM", "PKCS12", "JKS")
# A store holds a few certificates: anything bigger (or not a file, as /dev/zero) is refused
# before it is read, since a dynamic keystore update reads it on the broker's event loop.
MAX_STORE_BYTES = 4 << 20


class StoreError(ValueError):
    """A store that cannot be read: wrong type, wrong password, or not a store at all."""


@dataclass(frozen=True)
class SslSettings:
    """The ssl.* settings a TLS context is built from, under Kafka's names. An empty
    `*_type` means "read it from the file"."""

    keystore_type: str = ""
    keystore_location: str = ""
    keystore_password: str = ""
    keystore_certificate_chain: str = ""
    keystore_key: str = ""
    key_password: str = ""
    truststore_type: str = ""
    truststore_location: str = ""
    truststore_password: str = ""
    truststore_certificates: str = ""

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> SslSettings:
        """From Kafka-named properties (`ssl.keystore.location`, ...); others are ignored."""
        return cls(**{f: props.get("ssl." + f.replace("_", "."), "").strip() for f in cls.__dataclass_fields__})


def store_type(declared: str, path: str, what: str) -> str:
    """The type of the store at `path`: `declared` if set (checked against the file's
    first bytes), else what the first bytes say."""
    declared = declared.strip().upper()
    if declared and declared not in TYPES:
        raise StoreError(f"{what}.type={declared} is not supported (PEM, PKCS12 or JKS)")
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_STORE_BYTES:
            raise StoreError(f"{what}.location {path}: not a regular file of at most {MAX_STORE_BYTES} bytes")
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError as exc:
        raise StoreError(f"{what}.location {path}: {exc.strerror}") from None
    # PKCS12 is DER (a SEQUENCE, 0x30); PEM is text, maybe after "Bag Attributes" lines
    # (openssl pkcs12 -nodes writes them), which OpenSSL skips.
    found = "JKS" if head.startswith(JKS_MAGIC) else "PKCS12" if head[:1] == b"\x30" else "PEM"
    if declared and declared != found:
        raise StoreError(f"{what}.location {path} is not a {declared} store (it reads as {found})")
    return found


# ---- loading into an SSLContext ------------------------------------------------------

def load_keystore(ctx: ssl.SSLContext, s: SslSettings) -> bool:
    """The key and certificate chain this side presents; False when none is configured."""
    if s.keystore_location:
        kind = store_type(s.keystore_type, s.keystore_location, "ssl.keystore")
        if kind == "PEM":
            if s.keystore_password:
                raise StoreError("ssl.keystore.password cannot be set for a PEM keystore: "
                                 "only ssl.key.password (of an encrypted key)")
            try:
                ctx.load_cert_chain(s.keystore_location, password=s.key_password or None)
            except ssl.SSLError as exc:
                raise StoreError(f"ssl.keystore.location {s.keystore_location}: {exc.reason or exc}") from None
            return True
        key, chain = _key_and_chain(s, kind)
        _load_pem_chain(ctx, _pem("PRIVATE KEY", key) + b"".join(_pem("CERTIFICATE", c) for c in chain), None)
        return True
    if s.keystore_certificate_chain and s.keystore_key:
        _load_pem_chain(ctx, (s.keystore_key.strip() + "\n" + s.keystore_certificate_chain.strip() + "\n").encode(),
                        s.key_password or None)
        return True
    return False


def load_truststore(ctx: ssl.SSLContext, s: SslSettings) -> bool:
    """The certificates the other side's chain is verified against; False when none is configured."""
    if s.truststore_location:
        kind = store_type(s.truststore_type, s.truststore_location, "ssl.truststore")
        if kind == "PEM":
            if s.truststore_password:
                raise StoreError("ssl.truststore.password cannot be set for a PEM truststore")
            ctx.load_verify_locations(cafile=s.truststore_location)
            return True
        data = _read_store(s.truststore_location)
        certs = (read_jks_truststore(data, s.truststore_password) if kind == "JKS"
                 else _read_pkcs12_certificates(data, s.truststore_password))
        if not certs:
            raise StoreError(f"ssl.truststore.location {s.truststore_location} holds no certificate")
        ctx.load_verify_locations(cadata=b"".join(certs))  # concatenated DER
        return True
    if s.truststore_certificates:
        ctx.load_verify_locations(cadata=s.truststore_certificates)
        return True
    return False


def keystore_certificate(s: SslSettings) -> bytes:
    """The certificate (DER) a keystore presents: the first of its chain."""
    if s.keystore_location:
        kind = store_type(s.keystore_type, s.keystore_location, "ssl.keystore")
        if kind != "PEM":
            return _key_and_chain(s, kind)[1][0]
        text = _read_store(s.keystore_location).decode("ascii", "replace")
    else:
        text = s.keystore_certificate_chain
    begin, end = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"
    start = text.find(begin)
    stop = text.find(end, start)
    if start < 0 or stop < 0:
        raise StoreError("the keystore holds no PEM certificate")
    return ssl.PEM_cert_to_DER_cert(text[start:stop + len(end)])


def _key_and_chain(s: SslSettings, kind: str) -> tuple[bytes, list[bytes]]:
    """The private key (PKCS#8 DER) and certificate chain (DER, the leaf first) of a JKS or
    PKCS12 keystore."""
    data = _read_store(s.keystore_location)
    if kind == "JKS":
        return read_jks_keystore(data, s.keystore_password, s.key_password or s.keystore_password)
    return _read_pkcs12_keystore(data, s.keystore_password)


def _read_store(path: str) -> bytes:
    """A store's bytes, at most MAX_STORE_BYTES (a /proc file says it has none, and may)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_STORE_BYTES + 1)
    except OSError as exc:
        raise StoreError(f"{path}: {exc.strerror}") from None
    if len(data) > MAX_STORE_BYTES:
        raise StoreError(f"{path}: more than {MAX_STORE_BYTES} bytes: not a store")
    return data


def _pem(label: str, der: bytes) -> bytes:
    return ssl.DER_cert_to_PEM_cert(der).replace("CERTIFICATE", label).encode()


def _load_pem_chain(ctx: ssl.SSLContext, pem: bytes, password: str | None) -> None:
    """ssl loads a key only from a file: a private one, removed once read."""
    fd, path = tempfile.mkstemp(suffix=".pem", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        try:
            ctx.load_cert_chain(path, password=password)
        except ssl.SSLError as exc:
            raise StoreError(f"the keystore's key and certificates: {exc.reason or exc}") from None
    finally:
        os.unlink(path)


# ---- PKCS12 (through the cryptography package) ---------------------------------------

def _pkcs12(data: bytes, password: str) -> tuple[bytes | None, list[bytes]]:
    """(the key as PKCS#8 DER or None, the certificates as DER: the key's first)."""
    try:
        from cryptography.hazmat.primitives.serialization import (
            Encoding,
            NoEncryption,
            PrivateFormat,
            pkcs12,
        )
    except ImportError:
        raise StoreError("a PKCS12 store needs the cryptography package (pip install cryptography)") from None
    try:
        key, cert, extra = pkcs12.load_key_and_certificates(data, password.encode() if password else None)
    except ValueError as exc:
        raise StoreError(f"not a PKCS12 store, or the wrong password ({exc})") from None
    certs = ([cert] if cert is not None else []) + list(extra)
    key_der = None if key is None else key.private_bytes(Encoding.DER, PrivateFormat.PKCS8, NoEncryption())
    return key_der, [c.public_bytes(Encoding.DER) for c in certs]


def _read_pkcs12_keystore(data: bytes, password: str) -> tuple[bytes, list[bytes]]:
    key, certs = _pkcs12(data, password)
    if key is None or not certs:
        raise StoreError("the PKCS12 keystore holds no private key with its certificate")
    return key, certs


def _read_pkcs12_certificates(data: bytes, password: str) -> list[bytes]:
    return _pkcs12(data, password)[1]


# ---- JKS -----------------------------------------------------------------------------

class _Reader:
    """Big-endian fields of a JKS store, every length checked against what is left."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise StoreError("a truncated or corrupt JKS store")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u16(self) -> int:
        return int(struct.unpack(">H", self.take(2))[0])

    def u32(self) -> int:
        return int(struct.unpack(">I", self.take(4))[0])

    def utf(self) -> bytes:
        return self.take(self.u16())


def _password_bytes(password: str) -> bytes:
    """A Java char[] as JKS hashes it: two bytes a char, high first (UTF-16BE)."""
    return password.encode("utf-16-be")


def _read_jks(data: bytes, password: str) -> tuple[list[tuple[bytes, list[bytes]]], list[bytes]]:
    """(private key entries as (protected key, chain), trusted certificates), the store's
    digest checked when a password is given (Java's KeyStore.load does the same)."""
    r = _Reader(data)
    if r.take(4) != JKS_MAGIC:
        raise StoreError("not a JKS store")
    version = r.u32()
    if version not in (1, 2):
        raise StoreError(f"JKS version {version} is not supported")
    keys: list[tuple[bytes, list[bytes]]] = []
    trusted: list[bytes] = []
    for _ in range(r.u32()):
        tag = r.u32()
        r.utf()  # alias
        r.take(8)  # creation time
        if tag == 1:
            protected = r.take(r.u32())
            chain = []
            for _c in range(r.u32()):
                if version == 2:
                    r.utf()  # certificate type
                chain.append(r.take(r.u32()))
            keys.append((protected, chain))
        elif tag == 2:
            if version == 2:
                r.utf()
            trusted.append(r.take(r.u32()))
        else:
            raise StoreError(f"a JKS entry of unknown kind {tag} (a JCEKS store?)")
    body = r.pos
    digest = r.take(20)
    if r.pos != len(data):
        raise StoreError("bytes after the end of a JKS store")
    if password:
        expected = hashlib.sha1(_password_bytes(password) + _JKS_INTEGRITY_SALT + data[:body]).digest()
        if expected != digest:
            raise StoreError("the JKS store's password is wrong (or the store is corrupt)")
    return keys, trusted


def read_jks_truststore(data: bytes, password: str) -> list[bytes]:
    """Every certificate of a JKS store (DER): its trusted entries, else its key's chains."""
    keys, trusted = _read_jks(data, password)
    return trusted or [c for _k, chain in keys for c in chain]


def read_jks_keystore(data: bytes, store_password: str, key_password: str) -> tuple[bytes, list[bytes]]:
    """The first private key of a JKS store (PKCS#8 DER) and its certificate chain."""
    keys, _trusted = _read_jks(data, store_password)
    if not keys:
        raise StoreError("the JKS keystore holds no private key")
    protected, chain = keys[0]
    if not chain:
        raise StoreError("the JKS keystore's private key has no certificate")
    return _jks_unprotect(protected, key_password), chain


def _der(data: bytes, pos: int, tag: int) -> tuple[int, int]:
    """(start, end) of the contents of the DER element of `tag` at `pos`."""
    if pos + 2 > len(data) or data[pos] != tag:
        raise StoreError("a JKS private key entry that is not an EncryptedPrivateKeyInfo")
    n, pos = data[pos + 1], pos + 2
    if n & 0x80:
        width = n & 0x7F
        if not 1 <= width <= 4 or pos + width > len(data):
            raise StoreError("a JKS private key entry with a bad length")
        n, pos = int.from_bytes(data[pos:pos + width], "big"), pos + width
    if pos + n > len(data):
        raise StoreError("a truncated JKS private key entry")
    return pos, pos + n


def _jks_unprotect(info: bytes, password: str) -> bytes:
    """Sun's KeyProtector: EncryptedPrivateKeyInfo{algorithm, salt(20) + key XOR a SHA-1
    keystream + check(20)}; the check is SHA-1(password + key)."""
    start, end = _der(info, 0, 0x30)
    alg_start, alg_end = _der(info, start, 0x30)
    if not info[alg_start:alg_end].startswith(_JKS_KEY_PROTECTOR_OID):
        raise StoreError("a JKS private key protected by an algorithm other than JKS's own (a JCEKS store?)")
    data_start, data_end = _der(info, alg_end, 0x04)
    if data_end != end:
        raise StoreError("a JKS private key entry with trailing bytes")
    blob = info[data_start:data_end]
    if len(blob) < 40:
        raise StoreError("a truncated JKS private key")
    salt, encrypted, check = blob[:20], blob[20:-20], blob[-20:]
    pw = _password_bytes(password)
    stream = bytearray()
    digest = salt
    while len(stream) < len(encrypted):
        digest = hashlib.sha1(pw + digest).digest()
        stream += digest
    n = len(encrypted)
    key = (int.from_bytes(encrypted, "big") ^ int.from_bytes(stream[:n], "big")).to_bytes(n, "big")
    if hashlib.sha1(pw + key).digest() != check:
        raise StoreError("the JKS private key's password is wrong (ssl.key.password, else ssl.keystore.password)")
    return key
