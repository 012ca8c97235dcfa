// agenthub console: applies the Server-Sent Events of live parts.
// An element with data-sse="URL" follows that stream; data-sse-mode says
// what a "replace" or "prepend" event does to it. Every page works without
// this script; it only keeps pages current.
"use strict";
(function () {
  function follow(el) {
    var src = new EventSource(el.getAttribute("data-sse"));
    src.addEventListener("replace", function (e) {
      if (el.getAttribute("data-sse-mode") === "replace") {
        el.innerHTML = e.data; // drawn and escaped by the server's templates
      }
    });
    src.addEventListener("append", function (e) {
      el.appendChild(document.createTextNode(e.data)); // text, never markup
    });
    src.addEventListener("prepend", function (e) {
      el.insertAdjacentHTML("afterbegin", e.data);
    });
    src.addEventListener("reload", function () {
      src.close();
      window.location.reload();
    });
    src.addEventListener("done", function () {
      src.close();
    });
    src.addEventListener("failed", function (e) {
      src.close();
      var p = document.createElement("p");
      p.className = "error";
      p.setAttribute("role", "alert");
      p.textContent = "Live updates stopped: " + e.data;
      el.parentNode.insertBefore(p, el.nextSibling);
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    var els = document.querySelectorAll("[data-sse]");
    for (var i = 0; i < els.length; i++) {
      follow(els[i]);
    }
  });
})();
