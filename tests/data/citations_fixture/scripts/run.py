# The limits of issue 14 (an issue number), and the style of /work/shared/DESIGN.md
# (a file outside the repository).
