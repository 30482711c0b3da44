#include "s3/http.h"

#include <curl/curl.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

namespace rckpt::s3 {

// A request's state while the client's thread moves it.
class HttpClient::Call {
 public:
  explicit Call(const HttpRequest& request) : req(request) {}

  const HttpRequest& req;
  HttpResponse resp;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  size_t sent = 0;        // body bytes given to curl
  long status_seen = -1;  // the status the body being written belongs to
  bool overflow = false;  // a 2xx body longer than `into`
  char error_buffer[CURL_ERROR_SIZE] = {};

  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
};

namespace {

// An answer that is not for `into` (an error's XML, a listing) is kept up to
// this size; a longer one fails the request.
constexpr size_t kMaxTextBody = 64ull << 20;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* call = static_cast<HttpClient::Call*>(user);
  const std::string_view line(data, size * n);
  if (line.starts_with("HTTP/")) {
    call->resp.headers.clear();  // a new answer (after a 100 Continue, say)
    return size * n;
  }
  const size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    call->resp.headers.emplace_back(Lower(Trim(line.substr(0, colon))),
                                    Trim(line.substr(colon + 1)));
  }
  return size * n;
}

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* call = static_cast<HttpClient::Call*>(user);
  const size_t bytes = size * n;
  if (call->status_seen < 0) {
    long status = 0;
    curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &status);
    call->status_seen = status;
  }
  const bool success = call->status_seen >= 200 && call->status_seen < 300;
  if (success && !call->req.into.empty()) {
    const uint64_t at = call->resp.into_bytes;
    if (bytes > call->req.into.size() - at) {
      call->overflow = true;
      return 0;  // fails the transfer with CURLE_WRITE_ERROR
    }
    std::memcpy(call->req.into.data() + at, data, bytes);
    call->resp.into_bytes += bytes;
    return bytes;
  }
  if (call->resp.body.size() + bytes > kMaxTextBody) {
    call->overflow = true;
    return 0;
  }
  call->resp.body.append(data, bytes);
  return bytes;
}

size_t OnRead(char* buffer, size_t size, size_t n, void* user) {
  auto* call = static_cast<HttpClient::Call*>(user);
  const std::span<const std::byte> body = call->req.body;
  const size_t take = std::min(size * n, body.size() - call->sent);
  std::memcpy(buffer, body.data() + call->sent, take);
  call->sent += take;
  return take;
}

// curl rewinds the body to send it again (a reused connection that turned
// out closed, say).
int OnSeek(void* user, curl_off_t offset, int origin) {
  auto* call = static_cast<HttpClient::Call*>(user);
  if (origin != SEEK_SET || offset < 0 || static_cast<size_t>(offset) > call->req.body.size()) {
    return CURL_SEEKFUNC_CANTSEEK;
  }
  call->sent = static_cast<size_t>(offset);
  return CURL_SEEKFUNC_OK;
}

TransportError Classify(CURLcode code) {
  switch (code) {
    case CURLE_OK:
      return TransportError::kNone;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
      return TransportError::kConnect;
    case CURLE_OPERATION_TIMEDOUT:
      return TransportError::kTimeout;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_CRL_BADFILE:
      return TransportError::kTls;
    default:
      return TransportError::kBroken;
  }
}

}  // namespace

struct HttpClient::Impl {
  // The process the client's thread runs in: a child made by fork() has no
  // such thread, and its requests fail instead of waiting forever.
  pid_t owner = ::getpid();
  CURLM* multi = nullptr;
  int max_connections = 1;
  std::string ca_file;

  std::mutex mu;
  std::deque<std::shared_ptr<Call>> queued;  // guarded by mu
  bool stopping = false;                     // guarded by mu

  // Owned by the thread.
  std::vector<std::shared_ptr<Call>> active;
  std::vector<CURL*> idle_easy;
  std::thread thread;

  ~Impl() {
    for (CURL* e : idle_easy) curl_easy_cleanup(e);
    if (multi != nullptr) curl_multi_cleanup(multi);
  }

  void Finish(const std::shared_ptr<Call>& call, CURLcode code) {
    HttpResponse& r = call->resp;
    long status = 0;
    curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &status);
    r.status = static_cast<int>(status);
    r.error = call->overflow ? TransportError::kTooLong : Classify(code);
    if (code != CURLE_OK) {
      r.error_text = call->overflow ? "the answer was longer than the bytes asked for"
                     : call->error_buffer[0] != '\0' ? std::string(call->error_buffer)
                                                     : std::string(curl_easy_strerror(code));
    }
    curl_multi_remove_handle(multi, call->easy);
    curl_slist_free_all(call->headers);
    call->headers = nullptr;
    idle_easy.push_back(call->easy);
    call->easy = nullptr;
    {
      std::lock_guard<std::mutex> lock(call->mu);
      call->done = true;
    }
    call->cv.notify_all();
  }

  void Fail(const std::shared_ptr<Call>& call, std::string text) {
    call->resp.error = TransportError::kBroken;
    call->resp.error_text = std::move(text);
    {
      std::lock_guard<std::mutex> lock(call->mu);
      call->done = true;
    }
    call->cv.notify_all();
  }

  // Sets up `call` on an easy handle and adds it to the multi handle.
  void Begin(const std::shared_ptr<Call>& call) {
    CURL* e = nullptr;
    if (!idle_easy.empty()) {
      e = idle_easy.back();
      idle_easy.pop_back();
      curl_easy_reset(e);
    } else {
      e = curl_easy_init();
    }
    if (e == nullptr) {
      Fail(call, "libcurl could not make a transfer (out of memory)");
      return;
    }
    call->easy = e;
    const HttpRequest& q = call->req;
    curl_easy_setopt(e, CURLOPT_PRIVATE, call.get());
    curl_easy_setopt(e, CURLOPT_URL, q.url.c_str());
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(q.connect_timeout_ms));
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, static_cast<long>(std::max(1, q.stall_timeout_s)));
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    // Keys are sent as they are: "a/./b" and "a/../b" are keys, not paths
    // to normalise.
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, call->error_buffer);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, call.get());
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, call.get());
    if (!ca_file.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, ca_file.c_str());
    if (q.no_proxy) curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
    // S3 answers 100 Continue late or never on some servers: send at once.
    call->headers = curl_slist_append(call->headers, "Expect:");
    for (const auto& [name, value] : q.headers) {
      call->headers = curl_slist_append(call->headers, (name + ": " + value).c_str());
    }
    if (q.method == "GET") {
      curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    } else if (q.method == "HEAD") {
      curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (q.method == "PUT") {
      curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(q.body.size()));
    } else if (q.method == "POST") {
      curl_easy_setopt(e, CURLOPT_POST, 1L);
      curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(q.body.size()));
      // The XML bodies' type, unless the request gives its own (a
      // CreateMultipartUpload gives the object's).
      const bool typed = std::any_of(q.headers.begin(), q.headers.end(), [](const auto& h) {
        return strcasecmp(h.first.c_str(), "content-type") == 0;
      });
      if (!typed) call->headers = curl_slist_append(call->headers, "Content-Type: application/xml");
    } else {
      curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, q.method.c_str());
    }
    if (q.method == "PUT" || q.method == "POST") {
      curl_easy_setopt(e, CURLOPT_READFUNCTION, OnRead);
      curl_easy_setopt(e, CURLOPT_READDATA, call.get());
      curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, OnSeek);
      curl_easy_setopt(e, CURLOPT_SEEKDATA, call.get());
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, call->headers);
    const CURLMcode added = curl_multi_add_handle(multi, e);
    if (added != CURLM_OK) {
      curl_slist_free_all(call->headers);
      call->headers = nullptr;
      idle_easy.push_back(e);
      call->easy = nullptr;
      Fail(call,
           std::string("libcurl could not start the transfer: ") + curl_multi_strerror(added));
      return;
    }
    active.push_back(call);
  }

  void Run() {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stopping) break;
        while (!queued.empty() && static_cast<int>(active.size()) < max_connections) {
          std::shared_ptr<Call> call = std::move(queued.front());
          queued.pop_front();
          Begin(call);
        }
      }
      int running = 0;
      curl_multi_perform(multi, &running);
      int left = 0;
      while (CURLMsg* msg = curl_multi_info_read(multi, &left)) {
        if (msg->msg != CURLMSG_DONE) continue;
        auto it = std::find_if(active.begin(), active.end(), [&](const std::shared_ptr<Call>& c) {
          return c->easy == msg->easy_handle;
        });
        if (it == active.end()) continue;
        std::shared_ptr<Call> call = std::move(*it);
        active.erase(it);
        Finish(call, msg->data.result);
      }
      curl_multi_poll(multi, nullptr, 0, 1000, nullptr);
    }
    // Stopping: whatever is left fails.
    for (std::shared_ptr<Call>& call : active) {
      curl_multi_remove_handle(multi, call->easy);
      curl_slist_free_all(call->headers);
      call->headers = nullptr;
      idle_easy.push_back(call->easy);
      call->easy = nullptr;
      Fail(call, "the S3 client was closed");
    }
    active.clear();
    std::lock_guard<std::mutex> lock(mu);
    for (std::shared_ptr<Call>& call : queued) Fail(call, "the S3 client was closed");
    queued.clear();
  }
};

const std::string* HttpResponse::Header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (n == name) return &v;
  }
  return nullptr;
}

HttpClient::HttpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<HttpClient>> HttpClient::Create(int max_connections, std::string ca_file) {
  static const CURLcode global = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (global != CURLE_OK) {
    return Status::IoError(std::string("libcurl could not be initialised: ") +
                           curl_easy_strerror(global));
  }
  auto impl = std::make_unique<Impl>();
  impl->multi = curl_multi_init();
  if (impl->multi == nullptr) return Status::IoError("libcurl could not make a multi handle");
  impl->max_connections = std::max(1, max_connections);
  impl->ca_file = std::move(ca_file);
  curl_multi_setopt(impl->multi, CURLMOPT_MAXCONNECTS, static_cast<long>(impl->max_connections));
  Impl* raw = impl.get();
  try {
    impl->thread = std::thread([raw] { raw->Run(); });
  } catch (const std::system_error& e) {
    return Status::IoError(std::string("cannot start the S3 transport thread: ") + e.what());
  }
  return std::unique_ptr<HttpClient>(new HttpClient(std::move(impl)));
}

HttpClient::~HttpClient() {
  if (::getpid() != impl_->owner) {
    // Forked: the thread and the transfers are the parent's; nothing here
    // may touch them.
    impl_->thread.detach();
    (void)impl_.release();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  curl_multi_wakeup(impl_->multi);
  impl_->thread.join();
}

std::shared_ptr<HttpClient::Call> HttpClient::Start(const HttpRequest& request) {
  auto call = std::make_shared<Call>(request);
  if (::getpid() != impl_->owner) {
    impl_->Fail(call,
                "this S3 file system was made in another process (before a fork): make a new "
                "one in this process");
    return call;
  }
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stopping) {
      impl_->Fail(call, "the S3 client was closed");
      return call;
    }
    impl_->queued.push_back(call);
  }
  curl_multi_wakeup(impl_->multi);
  return call;
}

HttpResponse HttpClient::Wait(Call& call) {
  std::unique_lock<std::mutex> lock(call.mu);
  call.cv.wait(lock, [&] { return call.done; });
  return std::move(call.resp);
}

HttpResponse HttpClient::Perform(const HttpRequest& request) {
  std::shared_ptr<Call> call = Start(request);
  return Wait(*call);
}

}  // namespace rckpt::s3
