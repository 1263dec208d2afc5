"""The producer's one base exception: a message that says what went wrong, where, and how to fix it."""


class Vault2OkfError(Exception):
    pass
