"""Which notebook cells may keep outputs: exactly the checked ones (first line ``# NBVAL_CHECK_OUTPUT``)."""

CHECK_MARKER = "# NBVAL_CHECK_OUTPUT"


def cell_source(cell) -> str:
    source = cell["source"]
    return "".join(source) if isinstance(source, list) else source


def is_checked(cell) -> bool:
    """A code cell whose outputs nbval compares under ``--nbval-lax``."""
    return cell["cell_type"] == "code" and cell_source(cell).lstrip().startswith(CHECK_MARKER)


def outputs_only_in_checked_cells(cells) -> bool:
    """Code cells carry outputs exactly when they are checked cells, and no cell keeps an execution count."""
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        checked = is_checked(cell)
        if cell.get("execution_count") is not None or bool(cell.get("outputs")) != checked:
            return False
    return True
