"""The grader's parent side: what runs where, what the children say, and the report."""
