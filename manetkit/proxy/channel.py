"""Authentication of the peer channel (the mesh leg): session keys agreed at OPEN and a
MAC on every frame. Sans-I/O: pure functions and small state, no sockets or clocks;
randomness (private keys) is passed in by the session, which gets it injected.

Built from a well-kept library, not hand-made primitives: X25519 (RFC 7748) and HKDF
(RFC 5869) from ``cryptography`` (pyca), HMAC-SHA256 (RFC 2104) from the standard
library, truncated to 128 bits as RFC 4868 section 2.6 does for IPsec. Why not TLS 1.3
with an external PSK or a Noise library: docs/security.md, "The proxy's peer channel".

Key agreement (one X25519 exchange per session, as Noise's NN pattern; with a mesh key
mixed in, as NNpsk0):

* the initiator draws an ephemeral key pair and sends its public key ``pub_i`` in OPEN;
  the acceptor draws its own and answers with ``pub_a`` in ACCEPT;
* ``HKDF-SHA256(ikm = X25519(priv, peer pub), salt = mesh key or none,
  info = LABEL | "session" | sid | pub_i | pub_a)`` gives 64 bytes: the initiator's
  sending key, then the acceptor's;
* with a mesh key, OPEN and the data sent with it before ACCEPT arrives (0-RTT) are
  tagged with an *early* key, ``HKDF-SHA256(ikm = mesh key, salt = sid,
  info = LABEL | "early" | pub_i)``, so only a key holder can open a session.

Every tagged frame carries ``HMAC-SHA256(key, epoch u32 | seq u64 | frame)[:16]`` after
its body, where ``epoch`` is the transport's (its hello's) epoch and ``seq`` counts the
frames one side sent on that transport with that key, from 0. The tag therefore binds a
frame to its session, direction, transport and place in the stream: a frame cannot be
replayed, reordered, moved to another transport or forged without the key.
"""

from __future__ import annotations

import hmac
import struct
from dataclasses import dataclass, field

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from manetkit.proxy import frames as fr

TAG_LEN = fr.TAG_LEN  # HMAC-SHA256 truncated to 128 bits (RFC 4868 2.6)
PUB_LEN = fr.PUB_LEN  # X25519 public key (RFC 7748 5)
KEY_LEN = 32
LABEL = b"manetkit proxy v1 "
_NONCE = struct.Struct("!IQ")  # epoch, seq


class KeyAgreementError(ValueError):
    """The peer's public key gives no usable shared secret (a low-order point)."""


@dataclass(frozen=True, slots=True)
class MeshKey:
    """A pre-shared mesh key (the proxy config's ``auth.keys``): never logged or shown."""

    id: int  # 1-255 on the wire (0 means: no mesh key)
    secret: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class SessionKeys:
    """The two sending keys of one session (never logged or shown)."""

    initiator: bytes = field(repr=False)
    acceptor: bytes = field(repr=False)


class Ephemeral:
    """One side's X25519 key pair for one session, from 32 injected random bytes."""

    __slots__ = ("_private", "public")

    def __init__(self, private: bytes) -> None:
        self._private = X25519PrivateKey.from_private_bytes(private)
        self.public = self._private.public_key().public_bytes_raw()

    def shared(self, peer_public: bytes) -> bytes:
        try:
            return self._private.exchange(X25519PublicKey.from_public_bytes(peer_public))
        except (ValueError, UnsupportedAlgorithm) as exc:
            raise KeyAgreementError(f"peer public key refused: {exc}") from None


def _hkdf(ikm: bytes, salt: bytes | None, info: bytes, length: int) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(ikm)


def early_key(mesh: MeshKey, sid: bytes, pub_i: bytes) -> bytes:
    """The key of OPEN and the initiator's 0-RTT frames when a mesh key is configured."""
    return _hkdf(mesh.secret, sid, LABEL + b"early" + pub_i, KEY_LEN)


def session_keys(
    shared: bytes, mesh: MeshKey | None, sid: bytes, pub_i: bytes, pub_a: bytes
) -> SessionKeys:
    """Both sending keys from the X25519 secret (and the mesh key, when configured)."""
    okm = _hkdf(
        shared, mesh.secret if mesh else None, LABEL + b"session" + sid + pub_i + pub_a, 2 * KEY_LEN
    )
    return SessionKeys(okm[:KEY_LEN], okm[KEY_LEN:])


class Tagger:
    """Tags (or checks) one direction's frames on one transport: key, epoch, next seq."""

    __slots__ = ("_base", "epoch", "seq")

    def __init__(self, key: bytes, epoch: int) -> None:
        self._base = hmac.new(key, digestmod="sha256")
        self.epoch = epoch
        self.seq = 0

    def _mac(self, *parts: bytes | bytearray | memoryview) -> bytes:
        h = self._base.copy()
        h.update(_NONCE.pack(self.epoch, self.seq))
        for p in parts:
            h.update(p)
        return h.digest()[:TAG_LEN]

    def tag(self, *parts: bytes | bytearray | memoryview) -> bytes:
        """The tag of the next frame sent (``parts``: the frame without its tag)."""
        t = self._mac(*parts)
        self.seq += 1
        return t

    def check(self, data: bytes | bytearray | memoryview, tag: bytes | memoryview) -> bool:
        """Does ``tag`` belong to the next frame received? Constant-time; the sequence
        number advances only on success (a forgery does not desynchronise the stream)."""
        if not hmac.compare_digest(self._mac(data), bytes(tag)):
            return False
        self.seq += 1
        return True


# --- one session's channel ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Keyring:
    """The mesh keys a proxy holds (config ``auth``): the first tags OPENs, any checks
    them (roll-over, as the daemon's ``auth.keys``); ``required``: refuse OPENs without."""

    keys: tuple[MeshKey, ...] = ()
    required: bool = True

    @property
    def signing(self) -> MeshKey | None:
        return self.keys[0] if self.keys else None

    def find(self, key_id: int) -> MeshKey | None:
        return next((k for k in self.keys if k.id == key_id), None)


class Refused(Exception):
    """A hello the acceptor refuses before it touches any live transport: the counter to
    bump, the reason (logged once, sent in RESET) and, for a stale RESUME, the tagged
    STALE to send instead of a RESET."""

    def __init__(self, counter: str, reason: str, reply: bytes = b"") -> None:
        super().__init__(reason)
        self.counter = counter
        self.reason = reason
        self.reply = reply


def _seal(tagger: Tagger, flags: int, frame: bytes) -> bytes:
    signed = fr.tagged_header(frame, flags)
    return signed + tagger.tag(signed)


def _check_once(key: bytes, epoch: int, rec: fr.Record) -> bool:
    return Tagger(key, epoch).check(rec.signed, rec.tag)


def check_open(rec: fr.Record, keyring: Keyring) -> MeshKey | None:
    """The mesh key a new session's OPEN was opened with (None: no mesh key), or
    :class:`Refused` when the keyring does not let it in."""
    frame = rec.frame
    assert isinstance(frame, fr.Open)
    if frame.key_id == 0:
        if rec.flags:
            raise Refused("bad_proof", "OPEN without a key id carries a tag")
        if keyring.keys and keyring.required:
            raise Refused("refused_unauthenticated", "OPEN without the mesh key (auth.required)")
        return None
    mesh = keyring.find(frame.key_id)
    if mesh is None:
        raise Refused("bad_proof", f"OPEN under key id {frame.key_id}, which this proxy lacks")
    if rec.flags != fr.TAGGED | fr.EARLY or not _check_once(
        early_key(mesh, frame.sid, frame.pub), frame.epoch, rec
    ):
        raise Refused("bad_proof", f"OPEN's tag does not verify under key id {frame.key_id}")
    return mesh


class PeerChannel:
    """One session's keys and the taggers of its current transport (sans-I/O).

    Initiator: :meth:`begin_open` / :meth:`begin_resume` when a transport is attached,
    :meth:`on_accept` for the acceptor's ACCEPT. Acceptor: built from the OPEN that
    created the session; :meth:`begin` with each transport's hello. Both: :meth:`seal`
    every frame sent, :meth:`unseal` every frame received after the hello.
    """

    def __init__(
        self,
        initiator: bool,
        sid: bytes,
        private: bytes,
        mesh: MeshKey | None,
        peer_open: fr.Open | None = None,
    ) -> None:
        self.initiator = initiator
        self.sid = sid
        self.mesh = mesh
        self._eph = Ephemeral(private)
        self.early = None
        self.keys: SessionKeys | None = None
        if initiator:
            self.pub_i = self._eph.public
            self.pub_a = b""
            if mesh is not None:
                self.early = early_key(mesh, sid, self.pub_i)
        else:
            assert peer_open is not None
            self.pub_i = peer_open.pub
            self.pub_a = self._eph.public
            shared = self._eph.shared(self.pub_i)  # KeyAgreementError: the caller refuses
            self.keys = session_keys(shared, mesh, sid, self.pub_i, self.pub_a)
            if mesh is not None:
                self.early = early_key(mesh, sid, self.pub_i)
        self.tx: Tagger | None = None
        self.tx_flags = 0
        self.rx: Tagger | None = None
        self.rx_early: Tagger | None = None
        self.open_transport = False
        self.peer_proved = False  # acceptor: the initiator has shown the session key

    @property
    def key_id(self) -> int:
        return self.mesh.id if self.mesh else 0

    @property
    def mode(self) -> str:
        """What status shows: ``psk`` (mesh key and X25519) or ``ephemeral`` (X25519)."""
        return f"psk (key {self.mesh.id})" if self.mesh else "ephemeral"

    def end_transport(self) -> None:
        self.tx = self.rx = self.rx_early = None
        self.tx_flags = 0
        self.open_transport = False

    # --- initiator ---------------------------------------------------------------------

    def begin_open(self, epoch: int) -> None:
        """A transport whose hello is OPEN: tagged with the early key, or not at all."""
        self.end_transport()
        if self.early is not None:
            self.tx, self.tx_flags = Tagger(self.early, epoch), fr.TAGGED | fr.EARLY
        self.open_transport = True

    def begin_resume(self, epoch: int) -> None:
        """A transport whose hello is RESUME: everything under the session keys."""
        assert self.keys is not None
        self.end_transport()
        self.tx, self.tx_flags = Tagger(self.keys.initiator, epoch), fr.TAGGED
        self.rx = Tagger(self.keys.acceptor, epoch)

    def on_accept(self, rec: fr.Record, epoch: int) -> str | None:
        """The acceptor's ACCEPT on an OPEN transport: derive the keys (once), check its
        tag, switch our own frames to the session key. None, or what is wrong."""
        frame = rec.frame
        assert isinstance(frame, fr.Accept)
        if rec.flags != fr.TAGGED:
            return "ACCEPT without a session-key tag"
        if self.keys is None:
            try:
                shared = self._eph.shared(frame.pub)
            except KeyAgreementError as exc:
                return str(exc)
            keys = session_keys(shared, self.mesh, self.sid, self.pub_i, frame.pub)
        elif frame.pub != self.pub_a:
            return "ACCEPT with another public key than before"
        else:
            keys = self.keys
        rx = Tagger(keys.acceptor, epoch)
        if not rx.check(rec.signed, rec.tag):
            return "ACCEPT's tag does not verify"
        self.keys, self.pub_a, self.rx = keys, frame.pub, rx
        self.tx, self.tx_flags = Tagger(keys.initiator, epoch), fr.TAGGED
        return None

    # --- acceptor ----------------------------------------------------------------------

    def check_hello(self, rec: fr.Record) -> None:
        """Would this transport's hello (a repeated OPEN or a RESUME) prove the session?
        :class:`Refused` if not. Changes nothing (the shell asks before attaching)."""
        frame = rec.frame
        assert self.keys is not None
        if isinstance(frame, fr.Open):
            if self.peer_proved:
                raise Refused("bad_hellos", "OPEN for a session whose initiator holds its key")
            if frame.pub != self.pub_i or frame.key_id != self.key_id:
                raise Refused("bad_proof", "repeated OPEN with another key")
            if self.mesh is not None:
                assert self.early is not None
                if rec.flags != fr.TAGGED | fr.EARLY or not _check_once(
                    self.early, frame.epoch, rec
                ):
                    raise Refused("bad_proof", "repeated OPEN's tag does not verify")
            elif rec.flags:
                raise Refused("bad_proof", "repeated OPEN with a tag it cannot have")
            return
        assert isinstance(frame, fr.Resume)
        if rec.flags != fr.TAGGED or not _check_once(self.keys.initiator, frame.epoch, rec):
            raise Refused("bad_proof", "RESUME without the session key's proof")

    def stale_reply(self, rec_epoch: int, current: int) -> bytes:
        """STALE(current) for a transport whose hello had epoch ``rec_epoch``: tagged, so
        the initiator can trust it and RESUME with ``current + 1``."""
        assert self.keys is not None
        return _seal(
            Tagger(self.keys.acceptor, rec_epoch), fr.TAGGED, fr.pack_stale(self.sid, current)
        )

    def begin(self, rec: fr.Record) -> str | None:
        """The first frame of a transport (OPEN or RESUME): check it and set this
        transport's taggers. None, or what is wrong."""
        frame = rec.frame
        assert self.keys is not None
        self.end_transport()
        if isinstance(frame, fr.Open):
            if self.mesh is not None:
                assert self.early is not None
                early = Tagger(self.early, frame.epoch)
                if rec.flags != fr.TAGGED | fr.EARLY or not early.check(rec.signed, rec.tag):
                    return "OPEN's tag does not verify"
                self.rx_early = early
            elif rec.flags:
                return "OPEN with a tag it cannot have"
            self.open_transport = True
        elif isinstance(frame, fr.Resume):
            rx = Tagger(self.keys.initiator, frame.epoch)
            if rec.flags != fr.TAGGED or not rx.check(rec.signed, rec.tag):
                return "RESUME without the session key's proof"
            self.peer_proved = True
            self.rx = rx  # the RESUME was frame 0 under the session key
        else:
            return f"{type(frame).__name__} before OPEN/RESUME"
        if isinstance(frame, fr.Open):
            self.rx = Tagger(self.keys.initiator, frame.epoch)
        self.tx, self.tx_flags = Tagger(self.keys.acceptor, frame.epoch), fr.TAGGED
        return None

    # --- both --------------------------------------------------------------------------

    def unseal(self, rec: fr.Record) -> str | None:
        """Check a received frame's tag against this transport's state (None: good)."""
        if rec.flags == fr.TAGGED:
            if self.rx is None:
                return f"{type(rec.frame).__name__} tagged before the session key is known"
            if not self.rx.check(rec.signed, rec.tag):
                return f"{type(rec.frame).__name__}'s tag does not verify"
            if not self.initiator:
                self.peer_proved = True
            return None
        if rec.flags == fr.TAGGED | fr.EARLY:
            if self.initiator or self.rx_early is None or (self.rx and self.rx.seq):
                return f"early-key {type(rec.frame).__name__} out of place"
            if not self.rx_early.check(rec.signed, rec.tag):
                return f"early {type(rec.frame).__name__}'s tag does not verify"
            return None
        # untagged
        if self.initiator:
            if isinstance(rec.frame, fr.Reset | fr.Busy) and (self.rx is None or self.rx.seq == 0):
                # the acceptor's refusal of our hello, for good or for now (it has no key
                # to tag it)
                return None
            return f"untagged {type(rec.frame).__name__} from the acceptor"
        if (
            self.mesh is None
            and self.open_transport
            and not self.peer_proved
            and (self.rx is None or self.rx.seq == 0)
        ):
            return None  # ephemeral 0-RTT: before the initiator has the session key
        return f"untagged {type(rec.frame).__name__} after the session key"

    def seal(self, frame: bytes) -> bytes:
        """``frame`` as it goes on the wire (tagged when this transport has a key)."""
        if self.tx is None:
            return frame
        return _seal(self.tx, self.tx_flags, frame)

    def seal_data(self, offset: int, payload: memoryview) -> tuple[bytes, bytes]:
        """A DATA frame's header and tag (the payload goes between them, uncopied)."""
        head = fr.data_header(offset, len(payload), self.tx_flags)
        if self.tx is None:
            return head, b""
        return head, self.tx.tag(head, payload)


def tombstone_reply(keys: SessionKeys, rec: fr.Record, sid: bytes, delivered: int) -> bytes | None:
    """A finished session's answer to a late RESUME (everything delivered, FIN seen),
    tagged; None when the RESUME does not prove the session key."""
    frame = rec.frame
    if not isinstance(frame, fr.Resume) or rec.flags != fr.TAGGED:
        return None
    if not _check_once(keys.initiator, frame.epoch, rec):
        return None
    return _seal(
        Tagger(keys.acceptor, frame.epoch),
        fr.TAGGED,
        fr.pack_resume(sid, frame.epoch, delivered, True),
    )
