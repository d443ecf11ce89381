// MathJax 3 configuration for pymdownx.arithmatex (generic mode): typeset only the spans and
// blocks arithmatex marks. The MathJax files themselves are served from the site
// (assets/mathjax/, copied by .mkdocs/hooks.py from the django-static-mathjax package): no CDN.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex",
    menuOptions: { settings: { assistiveMml: false } }
  }
};
