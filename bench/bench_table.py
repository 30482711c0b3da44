"""Rows of a bench or a check, as they finish: a markdown table appended to a file, the
rows so far as JSON, and each line printed. Standard library only (the GPU proof's
checks, tests/gpu/proof_checks.py, use it too)."""

import json
from typing import Any, List, Optional


class Table:
    """A table titled `title` with `columns`, appended to the markdown file `table` (None:
    none); `json_path` (None: none) holds the rows so far, rewritten at each row."""

    def __init__(self, table: Optional[str], json_path: Optional[str], title: str,
                 columns: List[str]) -> None:
        self.table, self.json_path, self.columns = table, json_path, columns
        self.rows: List[dict[str, Any]] = []
        if table:
            with open(table, "a") as f:
                f.write(f"\n## {title}\n\n| " + " | ".join(columns) + " |\n|" +
                        "---|" * len(columns) + "\n")
        print(title, flush=True)

    def row(self, **values: Any) -> None:
        """One row: a value per column (missing ones empty; '|' in a value shown as '/')."""
        self.rows.append(values)
        cells = [str(values.get(c, "")).replace("|", "/") for c in self.columns]
        line = "| " + " | ".join(cells) + " |"
        print(line, flush=True)
        if self.table:
            with open(self.table, "a") as f:
                f.write(line + "\n")
        if self.json_path:
            with open(self.json_path, "w") as f:
                json.dump(self.rows, f, indent=1)
