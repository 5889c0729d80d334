// The review console's live updates: the page listens to the event stream (EventSource, which
// resumes with Last-Event-ID by itself) and, when an event it cares about arrives, fetches itself
// again and swaps its <main> for the new one. The new HTML is the server's own autoescaped page,
// parsed by DOMParser (scripts in it never run). No framework, no build step.
(function () {
  "use strict";
  var body = document.body;
  var types = (body.dataset.live || "").split(" ").filter(Boolean);
  var status = document.getElementById("live-status");
  if (!types.length || !window.EventSource) {
    return;
  }
  var busy = false;
  var again = false;

  function say(text) {
    if (status) {
      status.textContent = text;
    }
  }

  function editing() {
    var active = document.activeElement;
    var main = document.getElementById("live");
    return active && main && main.contains(active) && active.tagName === "INPUT" && active.value !== "";
  }

  function refresh() {
    if (busy || editing()) {
      again = true;
      return;
    }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (response) {
        if (response.redirected || !response.ok) {
          window.location.reload();
          return null;
        }
        return response.text();
      })
      .then(function (html) {
        if (html === null) {
          return;
        }
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("live");
        var main = document.getElementById("live");
        if (fresh && main) {
          main.replaceWith(document.importNode(fresh, true));
        }
        say("live · updated " + new Date().toLocaleTimeString());
      })
      .catch(function () {
        say("live · update failed");
      })
      .finally(function () {
        busy = false;
        if (again) {
          again = false;
          window.setTimeout(refresh, 150);
        }
      });
  }

  var source = new EventSource(body.dataset.events + "?after=" + encodeURIComponent(body.dataset.after || "0"));
  types.forEach(function (type) {
    source.addEventListener(type, refresh);
  });
  source.onopen = function () {
    say("live");
  };
  source.onerror = function () {
    say("live · reconnecting…");
  };
  document.addEventListener("focusout", function () {
    if (again && !busy) {
      again = false;
      refresh();
    }
  });
})();
