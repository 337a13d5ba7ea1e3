"""Passwords among dynamic broker configs, as Kafka's ZooKeeper mode keeps them
(KIP-226's PasswordEncoder): never in clear in ZooKeeper, but AES-encrypted with a key
derived (PBKDF2) from the brokers' `password.encoder.secret`, as
`encryptedPassword:<b64>,passwordLength:<n>,salt:<b64>,initializationVector:<b64>,
keyFactoryAlgorithm:...,cipherAlgorithm:...,keyLength:<bits>,iterations:<n>` (Kafka's
EncryptingPasswordEncoder with its defaults; PBKDF2WithHmacSHA1 values decode too). `password.encoder.old.secret`
still decodes what an earlier secret encoded. Needs the `cryptography` package."""

from __future__ import annotations

import base64
import hashlib
import os

from kafkarepl.server.config import BrokerConfig, ConfigError

KEY_FACTORY = "PBKDF2WithHmacSHA512"
_KEY_FACTORIES = {"PBKDF2WithHmacSHA512": "sha512", "PBKDF2WithHmacSHA1": "sha1"}  # -> hashlib's name
CIPHER = "AES/CBC/PKCS5Padding"


class PasswordEncoder:
    def __init__(self, secret: str, old_secret: str = "", key_length: int = 128, iterations: int = 4096) -> None:
        if not secret:
            raise ConfigError("password.encoder.secret is not set: dynamic password configs cannot be stored")
        self.secret, self.old_secret = secret, old_secret
        self.key_length, self.iterations = key_length, iterations

    @classmethod
    def of(cls, config: BrokerConfig) -> PasswordEncoder | None:
        """The broker's encoder; None without password.encoder.secret."""
        secret = config.extra.get("password.encoder.secret", "")
        if not secret:
            return None
        try:
            return cls(secret, config.extra.get("password.encoder.old.secret", ""),
                       int(config.extra.get("password.encoder.key.length", "128")),
                       int(config.extra.get("password.encoder.iterations", "4096")))
        except ValueError as exc:
            raise ConfigError(f"password.encoder.*: {exc}") from None

    @staticmethod
    def _key(secret: str, salt: bytes, bits: int, iterations: int, factory: str = KEY_FACTORY) -> bytes:
        return hashlib.pbkdf2_hmac(_KEY_FACTORIES[factory], secret.encode(), salt, iterations, bits // 8)

    def encode(self, password: str) -> str:
        ciphers, padding = _crypto()
        salt, iv = os.urandom(256), os.urandom(16)
        key = self._key(self.secret, salt, self.key_length, self.iterations)
        padder = padding.PKCS7(128).padder()
        data = padder.update(password.encode()) + padder.finalize()
        enc = ciphers.Cipher(ciphers.algorithms.AES(key), ciphers.modes.CBC(iv)).encryptor()
        encrypted = enc.update(data) + enc.finalize()
        fields = {"encryptedPassword": _b64(encrypted), "passwordLength": str(_java_length(password)), "salt": _b64(salt),
                  "initializationVector": _b64(iv), "keyFactoryAlgorithm": KEY_FACTORY, "cipherAlgorithm": CIPHER,
                  "keyLength": str(self.key_length), "iterations": str(self.iterations)}
        return ",".join(f"{k}:{v}" for k, v in fields.items())

    def decode(self, encoded: str) -> str:
        """The password; ConfigError if neither secret decodes it."""
        try:
            fields = dict(part.split(":", 1) for part in encoded.split(","))
            factory = fields.get("keyFactoryAlgorithm", KEY_FACTORY)
            if factory not in _KEY_FACTORIES or fields["cipherAlgorithm"] != CIPHER:
                raise ConfigError(f"password encoded with {factory} / {fields['cipherAlgorithm']}: not supported")
            salt, iv = base64.b64decode(fields["salt"]), base64.b64decode(fields["initializationVector"])
            encrypted = base64.b64decode(fields["encryptedPassword"])
            bits, iterations, length = int(fields["keyLength"]), int(fields["iterations"]), int(fields["passwordLength"])
        except (KeyError, ValueError) as exc:
            raise ConfigError(f"not an encoded password ({exc})") from None
        # bounded: a decode runs on the event loop (4096 iterations: a few ms)
        if not 0 < bits <= 256 or bits % 8 or not 0 < iterations <= 100_000 or len(iv) != 16:
            raise ConfigError("an encoded password with bad parameters")
        ciphers, padding = _crypto()
        for secret in filter(None, (self.secret, self.old_secret)):
            dec = ciphers.Cipher(ciphers.algorithms.AES(self._key(secret, salt, bits, iterations, factory)),
                                 ciphers.modes.CBC(iv)).decryptor()
            try:
                unpadder = padding.PKCS7(128).unpadder()
                plain = unpadder.update(dec.update(encrypted) + dec.finalize()) + unpadder.finalize()
                password = plain.decode()
            except ValueError:  # bad padding or bytes: another secret's
                continue
            if _java_length(password) == length:
                return password
        raise ConfigError("an encoded password that password.encoder.secret (or .old.secret) does not decode")


def _java_length(s: str) -> int:
    """String.length() in Java, which Kafka's passwordLength holds: UTF-16 code units."""
    return len(s.encode("utf-16-le")) // 2


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def _crypto():  # noqa: ANN202 - the cryptography modules, imported when first needed
    try:
        from cryptography.hazmat.primitives import ciphers, padding
    except ImportError:
        raise ConfigError("dynamic password configs need the cryptography package (pip install cryptography)") from None
    return ciphers, padding
