# The repository's entry point: the workflow itself is workflow/Snakefile (also what a lab's project
# uses as a Snakemake module).
include: "workflow/Snakefile"
