// Command xtermbundle joins Debian's xterm.js 3.8.1 into the one browser
// script the console serves (static/xterm/xterm.js), with its stylesheet
// and licence beside it.
//
// Debian's libjs-xterm ships xterm.js as a four-line CommonJS stub that
// requires "./public/Terminal" and cannot run in a browser by itself; the
// modules it needs are node-xterm's lib/ (compiled JavaScript, MIT, from
// the same source package). This tool wraps each module in a function and
// adds a require of a dozen lines that resolves the modules' relative
// paths: no bundler, no npm, and the output is plain, reviewable code.
//
// Run it after the Debian packages change (go generate ./internal/hub/console);
// the output is committed, so building agenthub needs neither package.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

func main() {
	lib := flag.String("lib", "/usr/share/nodejs/xterm/lib", "node-xterm's compiled modules")
	js := flag.String("libjs", "/usr/share/javascript/xterm", "libjs-xterm's files (entry stub, fit addon, stylesheet)")
	licence := flag.String("copyright", "/usr/share/doc/libjs-xterm/copyright", "the package's copyright file")
	out := flag.String("out", "static/xterm", "output directory")
	flag.Parse()
	if err := run(*lib, *js, *licence, *out); err != nil {
		fmt.Fprintln(os.Stderr, "xtermbundle:", err)
		os.Exit(1)
	}
}

var sourceMap = regexp.MustCompile(`(?m)^//# sourceMappingURL=.*$`)

func run(lib, js, licence, out string) error {
	mods := map[string][]byte{}
	err := filepath.WalkDir(lib, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".js") || strings.HasSuffix(p, ".test.js") {
			return err
		}
		rel, err := filepath.Rel(lib, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		mods["lib/"+filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		return err
	}
	if len(mods) == 0 {
		return fmt.Errorf("no modules under %s (apt-get install node-xterm)", lib)
	}
	for name, file := range map[string]string{"lib/xterm.js": "xterm.js", "addons/fit/fit.js": "addons/fit/fit.js"} {
		b, err := os.ReadFile(filepath.Join(js, file))
		if err != nil {
			return fmt.Errorf("%w (apt-get install libjs-xterm)", err)
		}
		mods[name] = b
	}
	names := make([]string, 0, len(mods))
	for n := range mods {
		names = append(names, n)
	}
	sort.Strings(names)

	var b bytes.Buffer
	b.WriteString("/* xterm.js 3.8.1 (MIT; see LICENSE beside this file), from Debian's libjs-xterm and node-xterm,\n" +
		" * joined into one browser script by agentd's internal/hub/console/xtermbundle. Do not edit. */\n")
	b.WriteString("(function () {\n'use strict';\nvar defs = {}, cache = {};\n")
	for _, n := range names {
		src := sourceMap.ReplaceAll(mods[n], nil)
		fmt.Fprintf(&b, "defs[%q] = function (exports, require, module) {\n%s\n};\n", n, bytes.TrimSpace(src))
	}
	b.WriteString(loader)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	css, err := os.ReadFile(filepath.Join(js, "xterm.css"))
	if err != nil {
		return err
	}
	lic, err := os.ReadFile(licence)
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{"xterm.js": b.Bytes(), "xterm.css": css, "LICENSE": lic} {
		if err := os.WriteFile(filepath.Join(out, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// loader is CommonJS's require for the modules above, and what the page
// gets: window.Terminal with the fit addon applied.
var loader = `function load(name) {
  if (cache[name]) { return cache[name].exports; }
  if (!defs[name]) { throw new Error('xterm bundle: no module ' + name); }
  var module = { exports: {} };
  cache[name] = module;
  var dir = name.slice(0, name.lastIndexOf('/'));
  defs[name].call(module.exports, module.exports, function (rel) {
    var parts = (dir + '/' + rel).split('/'), outp = [];
    for (var i = 0; i < parts.length; i++) {
      if (parts[i] === '..') { outp.pop(); } else if (parts[i] !== '.' && parts[i] !== '') { outp.push(parts[i]); }
    }
    var p = outp.join('/');
    return load(defs[p + '.js'] ? p + '.js' : p + '/index.js');
  }, module);
  return module.exports;
}
var Terminal = load('lib/xterm.js');
Terminal.applyAddon(load('addons/fit/fit.js'));
window.Terminal = Terminal;
})();
`
