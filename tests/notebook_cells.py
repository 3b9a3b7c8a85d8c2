"""Which notebook cells may keep outputs: exactly the checked ones (first line ``# NBVAL_CHECK_OUTPUT``)."""

CHECK_MARKER = "# NBVAL_CHECK_OUTPUT"


def cell_source(cell) -> str:
    source = cell["source"]
    return "".join(source) if isinstance(source, list) else source


def is_checked(cell) -> bool:
    """A code cell whose outputs nbval compares under ``--nbval-lax``."""
    return cell["cell_type"] == "code" and cell_source(cell).lstrip().startswith(CHECK_MARKER)


def outputs_only_in_checked_cells(cells) -> bool:
    """Code cells carry outputs exactly when they are checked cells.

    A checked cell also needs an execution count: nbval does not compare the outputs of a cell that has none
    (it fails with "Unrun reference cell has outputs"). Every other cell has neither outputs nor a count.
    """
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        if is_checked(cell):
            if not cell.get("outputs") or not isinstance(cell.get("execution_count"), int):
                return False
        elif cell.get("outputs") or cell.get("execution_count") is not None:
            return False
    return True
