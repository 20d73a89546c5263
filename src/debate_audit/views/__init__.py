"""Views of finished results: the browser, the inspect_ai logs, two runs compared."""
