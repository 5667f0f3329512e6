"""A conversation's working context: its history, its log of edits, and the call that extends
both (:mod:`.conversation`). The log's records live in :mod:`contextwarden._log`, the policy
that decides when to add one in :mod:`contextwarden._policy`."""
