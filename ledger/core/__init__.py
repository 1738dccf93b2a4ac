"""MutMem crypto core: canonical encoding, hashing, signing, chains, Merkle log.

Pure Python (standard library + PyNaCl). No Django import anywhere in this
package: the Django app and the portable verifier
(``python -m ledger.core.verify``) share it.
"""
