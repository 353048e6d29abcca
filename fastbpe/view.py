"""stub"""


def add_command(sub, kit) -> None:
    pass
