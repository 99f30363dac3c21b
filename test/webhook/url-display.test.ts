import { maskedQueryNames, maskedUrl, shownUrl, unmaskUrl } from '../../shared/http/url-display';

/** How URLs are shown (docs/design.md §11.3): without userinfo and query in reasons and logs, masked in objects. */
describe('URL display', () => {
  it.each([
    ['https://hooks.example.com/in?api_key=SECRET#frag', 'https://hooks.example.com/in'],
    ['https://user:pw@hooks.example.com:8443/in?x=1', 'https://hooks.example.com:8443/in'],
    ['https://hooks.example.com/in', 'https://hooks.example.com/in'],
    ['not a url?token=SECRET', 'not a url'],
    ['ftp://user:pw@host/path?x', 'ftp://host/path'],
  ])('when %s is shown in a reason or a log, then it reads %s', (url, shown) => {
    expect(shownUrl(url)).toBe(shown);
  });

  it.each([
    ['https://h.example/in?api_key=SECRET&page=2', 'https://h.example/in?api_key=********&page=2'],
    ['https://h.example/in?API%5FKEY=a%20b&Token=x&sig=&flag#top', 'https://h.example/in?API%5FKEY=********&Token=********&sig=********&flag#top'],
    ['https://h.example/in?page=2&q=a+b', 'https://h.example/in?page=2&q=a+b'],
    ['https://h.example/in', 'https://h.example/in'],
    ['https://a@b:pw@h.example/in?auth=1', 'https://a@b:********@h.example/in?auth=********'],
  ])('when %s is shown in an object, then it reads %s', (url, masked) => {
    expect(maskedUrl(url)).toBe(masked);
  });

  it('when a masked URL comes back, then each masked value takes the stored one of its name, in order, and other parts stay as sent', () => {
    const stored = 'https://h.example/in?key=one&page=2&key=two&api%5Ftoken=t%2Fz';
    expect(unmaskUrl(maskedUrl(stored), stored)).toBe(stored);
    expect(unmaskUrl('https://h.example/moved?page=3&key=********&api_token=********&key=new', stored)).toBe(
      'https://h.example/moved?page=3&key=one&api_token=t%2Fz&key=new',
    );
    expect(unmaskUrl('https://h.example/in?secret=********', stored)).toBe('https://h.example/in?secret=********');
    expect(maskedQueryNames('https://h.example/in?api%5Fkey=********&page=********&token=x')).toEqual(['api_key']);
  });
});
