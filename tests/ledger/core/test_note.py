"""Signed notes, checkpoints and cosignatures against the published vectors.

Sources (fetched as text, cited so a reader can re-check them):
- golang.org/x/mod/sumdb/note ``note_test.go`` (TestNewVerifier, TestNewSigner, TestSign,
  TestOpen): the PeterNeumann and EnochRoot keys, the signed text and both signature lines.
- C2SP ``signed-note.md`` (key ID = SHA-256(name || 0x0A || type || key)[:4]).
- C2SP ``tlog-checkpoint.md``: the example checkpoint (origin example.com/behind-the-sofa,
  size 20852163, root CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=).
- C2SP ``tlog-cosignature.md``: the example cosignature line of witness.example.com/w1
  (key ID + u64 timestamp 1679315147 + 64-byte signature) and the cosigned message layout.
"""

import base64

import pytest

from ledger.core.checkpoint import Checkpoint, open_checkpoint, parse_checkpoint_text, sign_checkpoint
from ledger.core.errors import SignatureInvalidError
from ledger.core.note import (
    COSIGNATURE_V1,
    NoteError,
    NoteSigner,
    VerifierKey,
    cosign,
    cosignature_message,
    cosigned_by,
    parse_note,
    parse_signer_key,
    parse_verifier_key,
    sign_note,
    verify_cosignature,
    verify_note,
)

PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
ENOCH_VKEY = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
TEXT = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n"
PETER_SIG = ("\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6"
             "RyyBwJnAM=\n")
ENOCH_SIG = ("\u2014 EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1"
             "RvMc+QQ=\n")

SPEC_CHECKPOINT = ("example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n\n"
                   "\u2014 example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcy"
                   "v2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
                   "\u2014 witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJsX3b2"
                   "oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==\n")


def test_the_go_verifier_key_parses_and_its_manglings_do_not():
    vk = parse_verifier_key(PETER_VKEY)
    assert vk.name == "PeterNeumann" and vk.key_id.hex() == "c74f20a3" and vk.encode() == PETER_VKEY
    for i in range(len(PETER_VKEY)):  # every one-byte change (TestNewVerifier)
        bad = PETER_VKEY[:i] + chr(ord(PETER_VKEY[i]) + 1) + PETER_VKEY[i + 1:]
        with pytest.raises(NoteError):
            parse_verifier_key(bad)
    for bad in ("PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==",
                "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", PETER_VKEY[:-4]):
        with pytest.raises(NoteError):
            parse_verifier_key(bad)


def test_signing_the_go_text_reproduces_the_published_note_byte_for_byte():
    signer = parse_signer_key(PETER_SKEY)
    assert signer.verifier.encode() == PETER_VKEY
    assert sign_note(TEXT, [signer]).encode() == TEXT + "\n" + PETER_SIG


def test_opening_the_go_notes():
    peter, enoch = parse_verifier_key(PETER_VKEY), parse_verifier_key(ENOCH_VKEY)
    note = parse_note(TEXT + "\n" + PETER_SIG + ENOCH_SIG)
    assert note.text == TEXT and [s.name for s in note.signatures] == ["PeterNeumann", "EnochRoot"]
    assert verify_note(note, [peter]) == [peter]  # the unknown EnochRoot line is ignored
    assert verify_note(note, [peter, enoch]) == [peter, enoch]
    with pytest.raises(SignatureInvalidError):
        verify_note(note, [])  # no verifiable signature
    with pytest.raises(SignatureInvalidError):  # a known key's bad signature rejects the note
        verify_note(parse_note(TEXT + "\n" + PETER_SIG[:60] + "ABCD" + PETER_SIG[60:]), [peter])
    with pytest.raises(NoteError):
        parse_note(TEXT + "\n" + PETER_SIG * 101)
    for bad in (TEXT, TEXT + "\n", TEXT + "\n" + PETER_SIG[:-1], "\x01" + TEXT + "\n" + PETER_SIG,
                b"\xff" + (TEXT + "\n" + PETER_SIG).encode(),
                TEXT + "\n" + "\u2014 Bad Name x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=",
                TEXT + "\n" + PETER_SIG + "Unexpected line.\n"):
        with pytest.raises(NoteError):
            parse_note(bad)


def test_the_spec_checkpoint_and_its_cosignature_line_parse():
    note = parse_note(SPEC_CHECKPOINT)
    cp = parse_checkpoint_text(note.text)
    assert (cp.origin, cp.size) == ("example.com/behind-the-sofa", 20852163)
    assert base64.b64encode(cp.root).decode() == "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I="
    assert cp.text() == note.text
    witness = note.signatures[1]
    # 4-byte key ID, then the u64 big-endian timestamp the spec's message example shows, then 64 bytes
    assert witness.key_id.hex() == "8d66cf3f" and len(witness.signature) == 72
    assert int.from_bytes(witness.signature[:8], "big") == 1679315147
    assert cosignature_message(note.text, 1679315147) == (
        b"cosignature/v1\ntime 1679315147\nexample.com/behind-the-sofa\n20852163\n"
        b"CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n")


@pytest.mark.parametrize("text", ["o\n", "o\n012\nAAAA\n", "o\n1\nAAAA\n", "\n1\n" + "A" * 43 + "=\n",
                                  "o\n1\n" + "A" * 43 + "=\n\n"])
def test_malformed_checkpoint_texts_are_refused(text):
    with pytest.raises(NoteError):
        parse_checkpoint_text(text)


def test_a_checkpoint_signed_with_the_go_key_opens_and_a_witness_cosigns_it():
    signer = parse_signer_key(PETER_SKEY)
    cp = Checkpoint("PeterNeumann", 5, bytes(range(32)))
    note = sign_checkpoint(cp, public_key=signer.public_key, sign=signer.sign_raw)
    opened = open_checkpoint(note.encode(), [signer.public_key])
    assert opened.checkpoint == cp
    with pytest.raises(SignatureInvalidError):
        open_checkpoint(note.encode().replace("\n5\n", "\n6\n"), [signer.public_key])
    w = NoteSigner("witness.example.com/w1", bytes(range(32)), COSIGNATURE_V1)
    wkey = VerifierKey(w.name, COSIGNATURE_V1, w.public_key)
    assert parse_verifier_key(wkey.encode()) == wkey
    line = cosign(note, w, 1679315147)
    cosigned = parse_note(note.encode() + line.line())
    assert verify_cosignature(cosigned, cosigned.signatures[1], wkey) == 1679315147
    assert cosigned_by(cosigned, [wkey]) == {wkey.encode(): 1679315147}
    # the witness's key under type 0x01 is a different key ID: not counted as a cosignature
    assert cosigned_by(cosigned, [VerifierKey(w.name, 0x01, w.public_key)]) == {}
    forged = parse_note(note.encode().replace("\n5\n", "\n6\n") + line.line())
    with pytest.raises(SignatureInvalidError):
        cosigned_by(forged, [wkey])
